#include "common/runtime/cuda_module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

// Defined only where the module is linked in (pdserve_cuda_entry); a weak
// reference reads as null everywhere else.
extern "C" const pdserve::CudaModuleApi* PdserveCudaModuleV1() __attribute__((weak));

namespace pdserve {
namespace {

absl::Status CheckAbi(const CudaModuleApi* api, const std::string& where) {
  if (api == nullptr) return absl::FailedPreconditionError(where + " returned no entry table");
  if (api->abi_version != kCudaModuleAbiVersion) {
    return absl::FailedPreconditionError(absl::StrCat(where, " has ABI version ", api->abi_version,
                                                      ", this binary needs ", kCudaModuleAbiVersion,
                                                      " (rebuild both from the same tree)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const CudaModuleApi*> OpenModule() {
  if (PdserveCudaModuleV1 != nullptr) {
    const CudaModuleApi* api = PdserveCudaModuleV1();
    if (absl::Status st = CheckAbi(api, "the linked-in CUDA module"); !st.ok()) return st;
    return api;
  }
  const std::string path = CudaModulePath();
  // RTLD_NOW: a symbol the executable does not export fails here, with its
  // name, rather than at some later call. RTLD_LOCAL: nothing of the
  // module's leaks into later lookups.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load the CUDA module ", path, ": ", dlerror(),
                     " (it is built next to the binaries when nvcc is found; "
                     "PDSERVE_CUDA_MODULE names another path)"));
  }
  using Entry = const CudaModuleApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaModuleEntryName));
  if (entry == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a pdserve CUDA module (no ", kCudaModuleEntryName, ")"));
  }
  const CudaModuleApi* api = entry();
  if (absl::Status st = CheckAbi(api, path); !st.ok()) return st;
  // The handle stays open for the life of the process: runners and pools
  // made by the module run its code until exit.
  LOG(INFO) << "loaded the CUDA module " << path;
  return api;
}

}  // namespace

std::string CudaModulePath() {
  if (const char* env = std::getenv("PDSERVE_CUDA_MODULE"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kCudaModuleFileName;  // dlopen's own search path then
  return (exe.parent_path() / kCudaModuleFileName).string();
}

absl::StatusOr<const CudaModuleApi*> LoadCudaModule() {
  static const absl::StatusOr<const CudaModuleApi*>* const loaded =
      new absl::StatusOr<const CudaModuleApi*>(OpenModule());
  return *loaded;
}

}  // namespace pdserve
