// SafetensorsFile: a read-only mmap of one file plus its parsed header.
#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

absl::Status ErrnoError(std::string_view what, const std::string& path, int err) {
  std::string message = model_internal::Cat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

// Owns a file descriptor for the few lines between open and mmap.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  FdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(model_internal::Cat(path, ": not a regular file"));
  }
  if (st.st_size == 0) {
    return absl::InvalidArgumentError(
        model_internal::Cat(path, ": empty file, not a safetensors file"));
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return ErrnoError("cannot mmap", path, errno);
  file->map_ = map;
  file->map_size_ = static_cast<size_t>(st.st_size);
  std::string_view bytes(static_cast<const char*>(map), file->map_size_);
  MODEL_ASSIGN_OR_RETURN(file->header_, ParseSafetensorsHeader(bytes, file->map_size_, path));
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::FromMemory(std::string name, SafetensorsHeader header,
                                                             std::vector<std::byte> data) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(name);
  file->header_ = std::move(header);
  file->header_.data_offset = 0;
  file->owned_ = std::move(data);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

const std::byte* SafetensorsFile::data(const TensorInfo& info) const {
  if (map_ == nullptr) return owned_.data() + info.data_begin;
  return static_cast<const std::byte*>(map_) + header_.data_offset + info.data_begin;
}

}  // namespace gemma
