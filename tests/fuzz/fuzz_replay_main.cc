// main() for fuzz targets built without -fsanitize=fuzzer (g++ builds):
// runs LLVMFuzzerTestOneInput once over every file named on the command line
// or found (recursively) under a named directory, so CI can replay the
// committed corpus under ASan/UBSan without clang's libFuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool ReadFile(const std::filesystem::path& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  bytes->assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return true;
}

void RunBytes(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// One random edit of the kinds libFuzzer starts with: flip a bit, set a
// byte to an interesting value, insert, erase, duplicate a slice, splice in
// part of another input, truncate.
std::string Mutate(const std::string& in, const std::vector<std::string>& corpus,
                   std::mt19937_64& rng) {
  std::string s = in;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static constexpr uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 16, 32, 64};
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 7) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(kInteresting[pick(sizeof(kInteresting))]);
        break;
      case 2:
        s.insert(pick(s.size() + 1), 1, static_cast<char>(rng()));
        break;
      case 3:
        if (!s.empty()) s.erase(pick(s.size()), 1 + pick(8));
        break;
      case 4:
        if (!s.empty()) {
          const size_t at = pick(s.size());
          s.insert(pick(s.size() + 1), s.substr(at, 1 + pick(16)));
        }
        break;
      case 5: {
        const std::string& other = corpus[pick(corpus.size())];
        if (!other.empty()) {
          const size_t at = pick(other.size());
          s.insert(pick(s.size() + 1), other.substr(at, 1 + pick(64)));
        }
        break;
      }
      default:
        s.resize(pick(s.size() + 1));
        break;
    }
  }
  return s;
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

// usage: TARGET [--mutations=N] FILE_OR_DIR...
// Replays every input, then (with N > 0) runs N mutated copies of them — a
// bounded, deterministic (fixed seed) stand-in for a libFuzzer session, so a
// g++ CI build under ASan/UBSan explores beyond the committed corpus.
int main(int argc, char** argv) {
  long mutations = 0;
  std::vector<std::filesystem::path> files;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::strtol(arg.c_str() + 12, nullptr, 10);
    } else {
      ok = Collect(arg, &files) && ok;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations=N] FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> corpus;
  for (const std::filesystem::path& f : files) {
    std::string bytes;
    ok = ReadFile(f, &bytes) && ok;
    RunBytes(bytes);
    corpus.push_back(std::move(bytes));
  }
  std::mt19937_64 rng(0x5eed);
  for (long i = 0; i < mutations; ++i) RunBytes(Mutate(corpus[i % corpus.size()], corpus, rng));
  std::printf("replayed %zu inputs, ran %ld mutations\n", files.size(), mutations);
  return ok ? 0 : 1;
}
