// Paths read from data files stay inside the data folder (issue 32: a COCO file_name or manifest fname of
// ../../../etc/passwd or an absolute path opened files outside --data).
#include "util/confined_path.h"

#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench {
namespace {

using testing::error_message;

TEST(ConfinedPath, JoinsPathsThatStayInsideTheRoot) {
  EXPECT_EQ(path_inside("/data", "val2017/1.jpg", "gt.json: images[0].file_name", false), "/data/val2017/1.jpg");
  EXPECT_EQ(path_inside("/data", "a/../b.jpg", "w", false), "/data/a/../b.jpg");
}

TEST(ConfinedPath, RefusesAbsolutePathsAndClimbsOutNamingTheRecord) {
  EXPECT_EQ(error_message([] { path_inside("/data", "../../../etc/passwd", "gt.json: images[3].file_name", false); }),
            "gt.json: images[3].file_name: \"../../../etc/passwd\" leads out of /data; expected a path inside it");
  EXPECT_EQ(error_message([] { path_inside("/data", "a/../../x", "w", false); }),
            "w: \"a/../../x\" leads out of /data; expected a path inside it");
  EXPECT_EQ(error_message([] { path_inside("/data", "/etc/passwd", "m.json: entry 2: files[].fname", false); }),
            "m.json: entry 2: files[].fname: \"/etc/passwd\" is an absolute path; expected a path relative to /data");
}

TEST(ConfinedPath, TheOptionAllowsPathsOutside) {
  EXPECT_EQ(path_inside("/data", "/srv/LibriSpeech/1.flac", "w", true), "/srv/LibriSpeech/1.flac");
  EXPECT_EQ(path_inside("/data", "../x.flac", "w", true), "/data/../x.flac");
}

}  // namespace
}  // namespace trainbench
