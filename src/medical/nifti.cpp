#include "medical/nifti.h"

#include <nifti2_io.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>

#include "util/error.h"

namespace trainbench::medical {

namespace {

constexpr int kMostSignificantByteFirst = 2;  // niftilib's MSB_FIRST, which nifti1_io.h defines and nifti2_io.h does not

struct NiftiImageDeleter {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};
using NiftiImagePtr = std::unique_ptr<nifti_image, NiftiImageDeleter>;

template <typename T>
void convert(const void* data, int64_t count, float* out) {
  const T* values = static_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(values[i]);
}

// The first bytes of a NIfTI header (gzip-compressed or not): sizeof_hdr 348 (NIfTI-1) or 540 (NIfTI-2) in
// either byte order. niftilib prints its own complaints to stderr; this lets the error say what the file is.
bool looks_like_nifti(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(head), 4);
  if (in.gcount() < 4) return false;
  if (head[0] == 0x1f && head[1] == 0x8b) return true;  // gzip: niftilib decides
  const uint32_t little = head[0] | (head[1] << 8) | (head[2] << 16) | (static_cast<uint32_t>(head[3]) << 24);
  const uint32_t big = head[3] | (head[2] << 8) | (head[1] << 16) | (static_cast<uint32_t>(head[0]) << 24);
  return little == 348 || little == 540 || big == 348 || big == 540;
}

}  // namespace

int64_t NiftiVolume::voxel_count() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

NiftiVolume read_nifti(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail(path, "no such NIfTI file");
  if (!looks_like_nifti(path)) fail(path, "not a NIfTI file (expected a NIfTI-1 or NIfTI-2 header, .nii or .nii.gz)");
  nifti_set_debug_level(0);  // the Error below says what went wrong; niftilib's own messages would repeat it
  // The header first: its dims decide what niftilib allocates, so they are held to the file and to a stated
  // maximum before any voxel is read (a 300-byte header once asked for 213 GB).
  NiftiImagePtr image(nifti_image_read(path.c_str(), 0));
  if (!image) fail(path, "not a readable NIfTI file (bad header, or the data is truncated)");
  int64_t data_bytes = 0;
  if (image->nvox < 0 || image->nvox > kMaxNiftiVoxels || image->nbyper <= 0 ||
      __builtin_mul_overflow(static_cast<int64_t>(image->nvox), static_cast<int64_t>(image->nbyper), &data_bytes))
    fail(path, "NIfTI header gives " + std::to_string(image->nvox) + " voxels; expected at most " +
                   std::to_string(kMaxNiftiVoxels) + " (2^31, KiTS19's largest volume is 2.8e8)");
  const bool compressed = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (!compressed && image->iname && std::string(image->iname) == path) {  // a single .nii: the voxels follow the header
    const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
    if (image->iname_offset < 0 || image->iname_offset > file_bytes || data_bytes > file_bytes - image->iname_offset)
      fail(path, "the data is truncated: the NIfTI header gives " + std::to_string(data_bytes) + " bytes of voxels from offset " +
                     std::to_string(image->iname_offset) + ", the file has " + std::to_string(file_bytes) + " bytes");
  }
  if (nifti_image_load(image.get()) != 0 || !image->data)
    fail(path, "the NIfTI file holds no voxel data (truncated, or a header without its .img)");

  NiftiVolume volume;
  volume.datatype = image->datatype;
  // nifti_type says 1 for a NIfTI-2 file read by this niftilib, so the version comes from the header itself;
  // so do the spacings, which niftilib replaces by 1.0 when they are 0 or not finite (nibabel keeps them).
  int header_version = 0;
  const std::unique_ptr<void, decltype(&free)> header(nifti_read_header(path.c_str(), &header_version, 0), &free);
  if (!header) fail(path, "not a readable NIfTI header");
  volume.version = header_version == 2 ? 2 : 1;
  // nifti_read_header leaves the fields in the file's byte order; sizeof_hdr is 348 or 540 once they are native.
  const int header_size = volume.version == 2 ? static_cast<const nifti_2_header*>(header.get())->sizeof_hdr
                                              : static_cast<const nifti_1_header*>(header.get())->sizeof_hdr;
  if (header_size != 348 && header_size != 540) swap_nifti_header(header.get(), volume.version);
  volume.big_endian = image->byteorder == kMostSignificantByteFirst;
  const int64_t ndim = image->ndim;
  if (ndim < 1 || ndim > 7) fail(path, "NIfTI ndim " + std::to_string(ndim) + " is not 1 to 7");
  for (int64_t axis = 1; axis <= ndim; ++axis) {
    volume.shape.push_back(image->dim[axis]);
    volume.spacing.push_back(volume.version == 2 ? static_cast<const nifti_2_header*>(header.get())->pixdim[axis]
                                                 : static_cast<const nifti_1_header*>(header.get())->pixdim[axis]);
  }
  const int64_t count = volume.voxel_count();
  if (count != image->nvox) fail(path, "NIfTI dims do not multiply to nvox");

  std::vector<float> fortran(static_cast<size_t>(count));
  switch (image->datatype) {
    case NIFTI_TYPE_UINT8: convert<uint8_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_INT8: convert<int8_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_INT16: convert<int16_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_UINT16: convert<uint16_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_INT32: convert<int32_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_UINT32: convert<uint32_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_INT64: convert<int64_t>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_FLOAT32: convert<float>(image->data, count, fortran.data()); break;
    case NIFTI_TYPE_FLOAT64: convert<double>(image->data, count, fortran.data()); break;
    default:
      fail(path, std::string("NIfTI datatype ") + nifti_datatype_string(image->datatype) +
                     " is not supported (expected an integer type, float32 or float64)");
  }
  // nibabel ignores a zero or non-finite slope, and a non-finite intercept.
  const double slope = image->scl_slope, intercept = std::isfinite(image->scl_inter) ? image->scl_inter : 0.0;
  const bool scaled = slope != 0 && std::isfinite(slope) && (slope != 1 || intercept != 0);

  // NIfTI stores the first axis fastest; nibabel's array in C order has the last axis fastest.
  volume.voxels.resize(fortran.size());
  std::vector<int64_t> fortran_stride(static_cast<size_t>(ndim), 1);
  for (int64_t axis = 1; axis < ndim; ++axis) fortran_stride[axis] = fortran_stride[axis - 1] * volume.shape[axis - 1];
  std::vector<int64_t> index(static_cast<size_t>(ndim), 0);
  for (int64_t c = 0; c < count; ++c) {
    int64_t f = 0;
    for (int64_t axis = 0; axis < ndim; ++axis) f += index[axis] * fortran_stride[axis];
    const float value = fortran[static_cast<size_t>(f)];
    volume.voxels[static_cast<size_t>(c)] =
        scaled ? static_cast<float>(static_cast<double>(value) * slope + intercept) : value;
    for (int64_t axis = ndim - 1; axis >= 0; --axis) {
      if (++index[axis] < volume.shape[axis]) break;
      index[axis] = 0;
    }
  }
  return volume;
}

void write_nifti(const std::string& path, const std::array<int64_t, 3>& shape, const std::array<double, 3>& spacing,
                 const std::vector<float>& voxels, NiftiStorage storage) {
  const int64_t count = shape[0] * shape[1] * shape[2];
  if (static_cast<int64_t>(voxels.size()) != count) fail(path, "voxel count does not match the shape");
  const int64_t dims[8] = {3, shape[0], shape[1], shape[2], 1, 1, 1, 1};
  const int datatype = storage == NiftiStorage::kInt16 ? NIFTI_TYPE_INT16 : NIFTI_TYPE_UINT8;
  nifti_set_debug_level(0);
  NiftiImagePtr image(nifti_make_new_nim(dims, datatype, 1));
  if (!image) fail(path, "niftilib could not allocate the volume");
  image->pixdim[1] = image->dx = spacing[0];
  image->pixdim[2] = image->dy = spacing[1];
  image->pixdim[3] = image->dz = spacing[2];
  image->xyz_units = NIFTI_UNITS_MM;
  image->qform_code = NIFTI_XFORM_SCANNER_ANAT;
  image->quatern_b = image->quatern_c = image->quatern_d = 0;
  image->qfac = 1;
  image->qto_xyz = nifti_quatern_to_dmat44(0, 0, 0, 0, 0, 0, spacing[0], spacing[1], spacing[2], 1);
  // From C order (last axis fastest) to NIfTI's first-axis-fastest order.
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k) {
        const float value = std::nearbyint(voxels[static_cast<size_t>((i * shape[1] + j) * shape[2] + k)]);
        const int64_t f = i + shape[0] * (j + shape[1] * k);
        if (storage == NiftiStorage::kInt16)
          static_cast<int16_t*>(image->data)[f] = static_cast<int16_t>(std::clamp(value, -32768.0f, 32767.0f));
        else
          static_cast<uint8_t*>(image->data)[f] = static_cast<uint8_t>(std::clamp(value, 0.0f, 255.0f));
      }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  if (nifti_set_filenames(image.get(), path.c_str(), 0, 1) != 0) fail(path, "not a NIfTI file name (.nii or .nii.gz)");
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  nifti_image_write(image.get());
  if (!std::filesystem::is_regular_file(path)) fail(path, "niftilib could not write the file");
}

}  // namespace trainbench::medical
