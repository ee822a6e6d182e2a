// The scan's layer taxonomy: a tensor's layer type and depth from its name.
#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>

#include "probes/scan/scan_probe.hpp"

namespace numprobe::probes {

// Layer types, by the names Hugging Face (Llama, Mistral, Qwen, DeepSeek), GPT-2/NeoX and
// llama.cpp (GGUF-converted) checkpoints use. Norms are checked first: "q_norm" is a norm.
std::string layer_type_of(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto has = [&](std::string_view s) { return n.find(s) != std::string::npos; };
  if (has("norm") || has(".ln_") || has("ln_f")) return "norms";
  if (has("lm_head") || n == "output.weight") return "lm_head";
  if (has("embed") || has("wte") || has("wpe") || has("tok_embeddings")) return "embeddings";
  if (has("qkv")) return "qkv_proj";
  if (has("q_proj") || has(".wq.") || has("attn_q.") || has(".query.")) return "q_proj";
  if (has("k_proj") || has(".wk.") || has("attn_k.") || has(".key.")) return "k_proj";
  if (has("v_proj") || has(".wv.") || has("attn_v.") || has(".value.")) return "v_proj";
  if (has("o_proj") || has(".wo.") || has("out_proj") || has("attn_output") || has("attn.c_proj"))
    return "o_proj";
  if (has("gate_up")) return "gate_up_proj";
  if (has("gate_proj") || has(".w1.") || has("ffn_gate")) return "gate_proj";
  if (has("up_proj") || has(".w3.") || has("ffn_up") || has("c_fc")) return "up_proj";
  if (has("down_proj") || has(".w2.") || has("ffn_down") || has("mlp.c_proj")) return "down_proj";
  if (has("router") || has(".gate.")) return "router";
  return "other";
}

// The first "<layers|layer|h|blocks|block|blk>.<N>." in the name.
int layer_index_of(const std::string& name) {
  static const std::regex re(R"((?:^|\.)(?:layers|layer|h|blocks|block|blk)\.(\d+)(?:\.|$))");
  std::smatch m;
  if (!std::regex_search(name, m, re)) return -1;
  return static_cast<int>(std::min<long long>(std::stoll(m[1].str()), 1 << 30));
}

}  // namespace numprobe::probes
