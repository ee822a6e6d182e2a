#include "numprobe/io/load_tensor.hpp"

#include <filesystem>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/llama_kl_base.hpp"
#include "numprobe/io/npy.hpp"
#include "numprobe/io/regular_file.hpp"
#include "numprobe/io/safetensors.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(p), ec);
}

}  // namespace

tensor_view load_tensor(std::string_view spec_in) {
  std::string spec(spec_in);
  std::string as;  // "@DTYPE" suffix
  if (const auto at = spec.rfind('@'); at != std::string::npos && !is_file(spec)) {
    as = spec.substr(at + 1);
    spec.resize(at);
  }
  std::string path = spec;
  std::string tensor;
  bool named = false;
  if (!is_file(spec)) {
    // Tensor names contain dots and slashes but the file part ends in a known extension;
    // split after the last "<ext>:" so a path with ':' in a folder name still works.
    for (const char* ext : {".safetensors:", ".json:", ".npy:"}) {
      const auto pos = spec.rfind(ext);
      if (pos != std::string::npos) {
        const auto colon = pos + std::string_view(ext).size() - 1;
        path = spec.substr(0, colon);
        tensor = spec.substr(colon + 1);
        named = true;
        break;
      }
    }
  }
  require_regular_file(path);  // names the case: missing, a directory, a FIFO, a device, a loop
  if (is_llama_kl_base(path))
    throw_input_error(path, "a llama-perplexity --kl-divergence-base file holds quantized log-probs, not a "
                            "tensor; `numprobe kl` reads it as BASE, CAND or --tokens (docs/kl.md)");
  tensor_view v;
  if (path.ends_with(".npy")) {
    if (named) throw_input_error(path, "a .npy file holds one array; drop ':" + tensor + "'");
    v = read_npy(path);
  } else {
    const auto c = checkpoint::open(path);
    if (!named) {
      if (c.tensors().size() != 1) {
        throw_input_error(path, "holds " + std::to_string(c.tensors().size()) +
                                    " tensors; name one as PATH:TENSOR");
      }
      tensor = c.tensors().front().name;
    }
    v = c.get(tensor);
  }
  if (!as.empty()) v = v.reinterpret(parse_dtype(as, v.place()));
  return v;
}

}  // namespace numprobe::io
