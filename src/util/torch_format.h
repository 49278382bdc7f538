#pragma once
// The two layers of torch.save's file format that trainbench's readers share: a pickle machine and torch's
// stored zip archive. plain_pickle.h reads pickles of plain Python values with them (Megatron's common.pt),
// torch_file.h state dicts of tensors. Both are torch-free.
//
// Why our own machine rather than a library's: LibTorch's unpickler and Python's pickle trust their input (they
// call whatever a file names, and recurse as deep as it nests), and no C++ pickle library checks what these
// readers must. This machine runs no code: it is a loop over opcodes, not a recursion, so nesting costs no stack;
// every length is checked against the bytes left before it is read; it holds at most a million values, a
// million memo entries and a million MARKs. GLOBAL, STACK_GLOBAL, REDUCE, BUILD and persistent ids are handed
// to the reader's PickleObjects, which builds only what it allows; without one they are refused by name.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/plain_pickle.h"

namespace trainbench {

constexpr int64_t kMaxPickleValues = 1000000;

// A value on the machine's stack. Nodes live in the machine's arena and point at each other (the memo can make a
// list hold itself; a reader's conversion bounds its depth). A node is a plain value (kind, scalar, items), a
// global the reader allowed (`global` is "module.name"), or an object the reader built (`object` >= 0, the
// reader's own number for it).
struct PickleNode {
  PlainValue::Kind kind = PlainValue::Kind::kNone;
  PlainValue scalar;               // None, bool, int, float, str
  std::vector<PickleNode*> items;  // list, tuple; dict: key, value, key, value, ...
  std::string global;
  int64_t object = -1;

  bool is_plain() const { return global.empty() && object < 0; }
  // "dict", "global torch.FloatStorage", "object" (for messages).
  std::string description() const;
};

class PickleMachine;

// What a reader lets a pickle build beyond plain values. Each hook throws through machine.error() (an Error naming
// the source and the offset) for anything it does not allow.
class PickleObjects {
 public:
  virtual ~PickleObjects() = default;
  // GLOBAL or STACK_GLOBAL of module.name: an allowed global's node (machine.make_global).
  virtual PickleNode* global(PickleMachine& machine, const std::string& module, const std::string& name) = 0;
  // REDUCE: `callable` (a node global() returned) called with the tuple `args`.
  virtual PickleNode* call(PickleMachine& machine, const PickleNode& callable, const PickleNode& args) = 0;
  // BINPERSID: the object of a persistent id.
  virtual PickleNode* persistent_load(PickleMachine& machine, const PickleNode& id) = 0;
  // BUILD: `state` set on `object` (which stays on the stack).
  virtual void build(PickleMachine& machine, PickleNode& object, const PickleNode& state) = 0;
};

// Runs one pickle of `bytes` from `start` to its STOP (protocols 2 to 5). `source` names the input in errors.
class PickleMachine {
 public:
  PickleMachine(std::string_view bytes, size_t start, std::string source, PickleObjects* objects = nullptr);

  // The value the pickle leaves at STOP; end() is then the offset after the STOP opcode.
  PickleNode* run();
  size_t end() const { return position_; }

  PickleNode* make(PlainValue::Kind kind, PlainValue scalar = {});
  PickleNode* make_global(std::string name);
  PickleNode* make_object(int64_t object);
  // The plain value of `node`: at most 64 levels deep (so a list that holds itself is refused), a million values
  // and 64 MiB of strings in all however often the memo repeats one; a global or an object in it is refused. A
  // dict key set twice keeps its last value, as in Python.
  PlainValue plain(const PickleNode& node) const;

  // Throws Error "<source>: pickle offset <opcode's offset>: <what>".
  [[noreturn]] void error(const std::string& what) const;

 private:
  struct Budget {
    int64_t values = kMaxPickleValues;
    int64_t string_bytes = int64_t{64} << 20;
  };

  [[noreturn]] void refuse(unsigned char opcode) const;
  const char* take(size_t count);
  uint64_t take_little_endian(int bytes);
  void push(PickleNode* node);
  PickleNode* pop();
  std::vector<PickleNode*> pop_to_mark();
  PickleNode* top(PlainValue::Kind kind, const char* opcode);
  void add_items(PickleNode* container, const std::vector<PickleNode*>& items, const char* opcode);
  PickleNode* make_container(PlainValue::Kind kind, std::vector<PickleNode*> items, const char* opcode);
  bool run_structure(unsigned char opcode);
  bool run_fill(unsigned char opcode);
  bool run_scalar(unsigned char opcode);
  bool run_memo(unsigned char opcode);
  bool run_objects(unsigned char opcode);
  void push_string(size_t length);
  void push_long(size_t length);
  PlainValue convert(const PickleNode& node, int depth, Budget& budget) const;

  std::string_view data_;
  const std::string source_;
  PickleObjects* objects_;
  size_t position_, opcode_at_;
  std::vector<std::unique_ptr<PickleNode>> arena_;
  std::vector<PickleNode*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleNode*> memo_;
};

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as Python decodes pickled str.
bool is_utf8(std::string_view text);
// zlib's CRC-32 of any length.
uint32_t crc_of(const char* data, size_t size);
// `value`'s lowest `bytes` bytes, least significant first.
void append_little_endian(std::string& out, uint64_t value, int bytes);

// A stored (uncompressed) zip of (name, data) entries, as torch.save writes one.
std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries);

// The entries of torch.save's zip archive, each a view into the archive's bytes. torch.save stores entries
// uncompressed; every offset and size is checked against the file, and every entry's CRC-32.
struct TorchArchive {
  std::string prefix;  // "<archive>/", the one folder every entry is under
  std::string_view pickle;
  std::unordered_map<std::string, std::string_view> entries;  // by name, the prefix included
};
// `zip` read as torch.save's archive: one `<archive>/data.pkl`, a `version` torch reads, at most `max_entries`
// entries, all under `<archive>/`. Refusals name `path`.
TorchArchive read_torch_archive(std::string_view zip, const std::string& path, uint64_t max_entries);

}  // namespace trainbench
