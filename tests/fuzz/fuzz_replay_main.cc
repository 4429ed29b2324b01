// main() for fuzz targets built without -fsanitize=fuzzer (g++ builds):
// runs LLVMFuzzerTestOneInput once over every file named on the command line
// or found (recursively) under a named directory, so CI can replay the
// committed corpus under ASan/UBSan without clang's libFuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

// Appends `arg` if it is a file, or every regular file below it if it is a
// directory. Uses error_code overloads: this project builds without exceptions.
bool Collect(const std::filesystem::path& arg, std::vector<std::filesystem::path>* out) {
  std::error_code ec;
  if (!std::filesystem::is_directory(arg, ec)) {
    out->push_back(arg);
    return true;
  }
  std::filesystem::recursive_directory_iterator it(arg, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) out->push_back(it->path());
  }
  if (ec) std::fprintf(stderr, "cannot list %s: %s\n", arg.c_str(), ec.message().c_str());
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  bool ok = true;
  for (int i = 1; i < argc; ++i) ok = Collect(argv[i], &files) && ok;
  for (const std::filesystem::path& f : files) ok = RunFile(f) && ok;
  std::printf("replayed %zu inputs\n", files.size());
  return ok ? 0 : 1;
}
