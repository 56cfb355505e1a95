// The driver of a fuzz target in the normal build (no libFuzzer; tests/fuzz/CMakeLists.txt):
// runs the target once on each file given, and on each regular file of each folder given
// (its seed corpus), in name order. A target that aborts (a violated property, an exception
// other than bitsim::Error) ends the run there, naming the input. Exit 1 when no input was
// found: a target without seeds fails its test.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "%s: not a file or a folder\n", argv[i]);
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs (give seed files or corpus folders)\n");
    return 1;
  }
  for (const auto& p : inputs) {
    std::fprintf(stderr, "input %s\n", p.c_str());
    std::ifstream f(p, std::ios::binary);
    const std::string data(std::istreambuf_iterator<char>(f), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  }
  std::printf("%zu inputs passed\n", inputs.size());
  return 0;
}
