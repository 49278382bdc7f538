#pragma once
// Zarr v2 arrays on a directory store, read and written without Python: the format of Megatron's distributed
// checkpoint (one array per parameter, README "Checkpoint Zarr format" of the GPT-3 reference). A directory
// holds `.zarray` (JSON metadata) and one file per chunk, named by its chunk indices ("0.3.1", or "0/3/1" with
// dimension_separator "/"); every chunk file holds a whole chunk, edge chunks padded to the chunk shape as
// zarr does. Reads and writes take a hyperslab (start and count per dimension) and touch only the chunks it
// intersects, so each rank of a tensor/pipeline layout reads only its slice of a stacked 96-layer array.
//
// What is accepted, and why:
//  - dtypes <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8, and "bfloat16" (Megatron rewrites numpy's "<V2" to it,
//    as tensorstore names bfloat16). Big-endian ">..." dtypes are read (byte-swapped on reading) but never
//    written: python3-zarr writes them on request, while everything trainbench writes is little-endian.
//  - order "C" only ("F" refused by name), filters null only (any filter refused by its id).
//  - compressor null (what the reference's checkpoint uses: Megatron creates its arrays with compressor=None, and
//    the published fp32 checkpoint was converted by tensorstore with 'compressor': None), blosc (Debian's
//    libblosc: blosclz, lz4, lz4hc, zlib, zstd; shuffle -1/0/1/2), zlib and gzip (numcodecs' "zlib" and "gzip"
//    with "level"). Any other codec is refused naming the array and the codec.
//  - fill_value null, a number, "NaN", "Infinity" or "-Infinity". A missing chunk reads as fill_value; with
//    fill_value null it is an error naming the chunk file. python3-zarr returns uninitialised memory there (its
//    np.empty), and Megatron writes every chunk of its fill_value=None arrays (zarr's write_empty_chunks=False
//    never skips a chunk when fill_value is None), so a missing chunk in a checkpoint means a broken one.
//
// Every chunk file is written through AtomicFile (complete or absent). Two writers must not share a chunk: a
// write that covers part of a chunk reads, merges and rewrites it. Megatron's shards are its chunks, so ranks
// never share one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainbench::zarr {

enum class DataType {
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64
};

// Bytes per element of `type`.
int element_size(DataType type);
// The .zarray spelling of a little-endian `type`: "<f4", "bfloat16", "|u1", ...
std::string dtype_name(DataType type);

struct Compressor {
  enum class Kind { kNone, kBlosc, kZlib, kGzip };
  Kind kind = Kind::kNone;
  int level = 5;                   // blosc's clevel, zlib's and gzip's level (0-9)
  std::string blosc_name = "lz4";  // blosc's cname
  int blosc_shuffle = 1;           // -1 auto (bit-shuffle for 1-byte types, else byte), 0 none, 1 byte, 2 bit
  int blosc_block_size = 0;        // 0: blosc chooses
};

struct ArrayMetadata {
  std::vector<int64_t> shape;
  std::vector<int64_t> chunks;  // as many as shape, each >= 1
  DataType dtype = DataType::kFloat32;
  bool big_endian = false;           // only ever true for arrays read (see above)
  std::optional<double> fill_value;  // nullopt: JSON null
  Compressor compressor;
  char dimension_separator = '.';  // '.' or '/'
};

// Parses `.zarray` text; throws Error naming `source` and the field for anything outside the list above: a
// missing or mistyped field, an unsupported dtype, order, filter or codec, chunks that do not match the shape.
ArrayMetadata parse_zarray(const std::string& text, const std::string& source);
// The `.zarray` text of `metadata` (little-endian; format_zarray(parse_zarray(t)) keeps every field of t).
std::string format_zarray(const ArrayMetadata& metadata);

// A hyperslab: `start[d]` and `count[d]` elements along each dimension d.
struct Region {
  std::vector<int64_t> start;
  std::vector<int64_t> count;

  int64_t element_count() const;
};

// The whole array as a region.
Region whole(const ArrayMetadata& metadata);

class Array {
 public:
  // Opens the array in `directory` (reads and checks its .zarray).
  static Array open(const std::string& directory);
  // Creates `directory` (and parents) and commits its .zarray; refuses a directory that already holds one, and
  // big-endian metadata. No chunk is written.
  static Array create(const std::string& directory, const ArrayMetadata& metadata);

  const ArrayMetadata& metadata() const { return metadata_; }
  const std::string& directory() const { return directory_; }

  // The region's elements in C order as little-endian bytes of the array's dtype, into `out`
  // (region.element_count() * element_size bytes).
  void read_bytes(const Region& region, void* out) const;
  // The region converted to float32 (int64 and float64 values round to the nearest float).
  void read_float32(const Region& region, float* out) const;
  std::vector<float> read_float32(const Region& region) const;

  // Writes little-endian elements of the array's dtype, C order, over `region`; each touched chunk file is
  // committed atomically.
  void write_bytes(const Region& region, const void* data) const;
  // Writes float32 values converted (round to nearest even) to a float dtype; refuses integer dtypes by name.
  void write_float32(const Region& region, const float* data) const;

  // The file that holds chunk `indices` (chunk coordinates, not element coordinates).
  std::string chunk_path(const std::vector<int64_t>& indices) const;

 private:
  Array(std::string directory, ArrayMetadata metadata);
  std::string directory_;
  ArrayMetadata metadata_;
};

// Conversions used by the readers and writers, exposed for tests: IEEE half and bfloat16 to and from float
// (round to nearest even; NaN stays NaN).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

}  // namespace trainbench::zarr
