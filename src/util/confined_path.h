#pragma once
// Paths named inside data files (a COCO image's file_name, a speech manifest's fname) are relative to the data
// folder the user gave; a crafted file must not make a loader open /etc/passwd or another user's files.
#include <string>

namespace trainbench {

// root / relative, as a string. Unless `allow_outside_root`, throws Error naming `where` when `relative` is
// absolute or its ".." components climb out of `root` (judged on the text: links inside root are the user's).
std::string path_inside(const std::string& root, const std::string& relative, const std::string& where,
                        bool allow_outside_root);

}  // namespace trainbench
