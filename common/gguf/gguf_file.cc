#include "common/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gguf/gguf_parser.h"
#include "common/gguf/gguf_value.h"

namespace pdserve {
namespace {

absl::StatusOr<const GgufValue*> Lookup(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.Find(key);
  if (v != nullptr) return v;
  return absl::NotFoundError(absl::StrCat("gguf: key ", QuoteGgufName(key), " not found"));
}

// Prefixes a conversion error with the key it came from.
template <typename T>
absl::StatusOr<T> Keyed(std::string_view key, absl::StatusOr<T> r) {
  if (r.ok()) return r;
  return absl::Status(r.status().code(),
                      absl::StrCat("gguf: key ", QuoteGgufName(key), " ", r.status().message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("gguf: cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("gguf: cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("gguf: ", path, " is not a regular file"));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->size_ = static_cast<uint64_t>(st.st_size);
  file->base_ = reinterpret_cast<const uint8_t*>(file->buffer_.data());
  if (file->size_ > 0) {
    void* mapping = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    close(fd);
    if (mapping == MAP_FAILED) return absl::ErrnoToStatus(err, absl::StrCat("gguf: mmap ", path));
    file->mapping_ = mapping;
    file->base_ = static_cast<const uint8_t*>(mapping);
  } else {
    close(fd);
  }
  absl::Status s = file->Parse();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), " (", path, ")"));
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::string bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  // The object never moves (it lives behind a unique_ptr), so data() is stable.
  file->buffer_ = std::move(bytes);
  file->base_ = reinterpret_cast<const uint8_t*>(file->buffer_.data());
  file->size_ = file->buffer_.size();
  RETURN_IF_ERROR(file->Parse());
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) munmap(mapping_, size_);
}

absl::Status GgufFile::Parse() {
  absl::Status s = Parser(this).Run();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("gguf: ", s.message()));
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_.find(absl::string_view(key.data(), key.size()));
  return it == kv_.end() ? nullptr : &it->second;
}

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufValueToUint(*v));
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufValueToInt(*v));
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufValueToFloat(*v));
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufValueToBool(*v));
}

absl::StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufValueToString(*v));
}

absl::StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufArrayToStrings(*v));
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufArrayToInts(*v));
}

absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Lookup(*this, key));
  return Keyed(key, GgufArrayToFloats(*v));
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(absl::string_view(name.data(), name.size()));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pdserve
