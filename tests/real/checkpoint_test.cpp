// The safetensors loader on a tiny Llama checkpoint the test writes itself:
// config.json, two shards and their index, tensors in BF16 and F32; and the
// located errors of a tensor whose data does not fill its shape and of a
// missing file; and a byte model read back and measured by eval-quality's
// harness as its weights.

#include "compression/model_quality.hpp"
#include "kernels/model/bf16.hpp"
#include "real/checkpoint.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

model::llama_config tiny() {
  model::llama_config c;
  c.vocab = 64;
  c.hidden = 16;
  c.intermediate = 24;
  c.layers = 2;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.rms_eps = 1e-6;
  c.rope_theta = 500000;
  c.scaling = {true, 8.0, 1.0, 4.0, 8192};
  return c;
}

struct tensor {
  std::vector<model::bf16> values;
  std::vector<size_t> shape;
  bool as_f32 = false;
};

void write_safetensors(const fs::path& path, const std::map<std::string, tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    size_t begin = data.size();
    for (auto v : t.values) {
      if (t.as_f32) {
        float f = model::bf16_to_float(v);
        data.append(reinterpret_cast<const char*>(&f), 4);
      } else {
        data.append(reinterpret_cast<const char*>(&v), 2);
      }
    }
    header[name] = {{"dtype", t.as_f32 ? "F32" : "BF16"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  auto text = header.dump();
  uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>(n >> (8 * i) & 0xFF));
  out << text << data;
}

/// Writes `w` as a two-shard checkpoint (layer 1 and the head in the second).
void write_checkpoint(const fs::path& dir, const model::llama_weights& w) {
  const auto& c = w.config;
  nlohmann::json cfg{{"architectures", {"LlamaForCausalLM"}},
                     {"vocab_size", c.vocab},
                     {"hidden_size", c.hidden},
                     {"intermediate_size", c.intermediate},
                     {"num_hidden_layers", c.layers},
                     {"num_attention_heads", c.q_heads},
                     {"num_key_value_heads", c.kv_heads},
                     {"rms_norm_eps", c.rms_eps},
                     {"rope_theta", c.rope_theta},
                     {"rope_scaling",
                      {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}}},
                     {"tie_word_embeddings", false}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  const size_t h = c.hidden, q = size_t{c.q_heads} * c.head_dim, kv = size_t{c.kv_heads} * c.head_dim,
               f = c.intermediate;
  std::map<std::string, tensor> first, second;
  first["model.embed_tokens.weight"] = {w.embed, {c.vocab, h}};
  for (uint32_t l = 0; l < c.layers; ++l) {
    auto& shard = l == 0 ? first : second;
    const auto& lw = w.layers[l];
    auto p = "model.layers." + std::to_string(l) + ".";
    shard[p + "input_layernorm.weight"] = {lw.attn_norm, {h}, true};
    shard[p + "self_attn.q_proj.weight"] = {lw.wq, {q, h}};
    shard[p + "self_attn.k_proj.weight"] = {lw.wk, {kv, h}};
    shard[p + "self_attn.v_proj.weight"] = {lw.wv, {kv, h}};
    shard[p + "self_attn.o_proj.weight"] = {lw.wo, {h, q}};
    shard[p + "post_attention_layernorm.weight"] = {lw.mlp_norm, {h}, true};
    shard[p + "mlp.gate_proj.weight"] = {lw.w_gate, {f, h}};
    shard[p + "mlp.up_proj.weight"] = {lw.w_up, {f, h}, true};
    shard[p + "mlp.down_proj.weight"] = {lw.w_down, {h, f}};
  }
  second["model.norm.weight"] = {w.final_norm, {h}};
  second["lm_head.weight"] = {w.lm_head, {c.vocab, h}};
  write_safetensors(dir / "model-00001-of-00002.safetensors", first);
  write_safetensors(dir / "model-00002-of-00002.safetensors", second);
  nlohmann::json index{{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : first)
    index["weight_map"][name] = "model-00001-of-00002.safetensors";
  for (const auto& [name, t] : second)
    index["weight_map"][name] = "model-00002-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

struct scratch {
  fs::path dir = fs::temp_directory_path() / ("kvtier-ckpt-" + std::to_string(::getpid()));
  scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
};

} // namespace

TEST(checkpoint, loads_a_sharded_llama_checkpoint_exactly) {
  scratch s;
  auto w = model::seeded_weights(tiny(), 11);
  write_checkpoint(s.dir, w);
  auto shape = read_checkpoint_config(s.dir.string());
  ASSERT_TRUE(shape) << describe(shape.error());
  EXPECT_EQ(shape->head_dim, 4u); // hidden / heads when config.json has no head_dim
  EXPECT_TRUE(shape->scaling.enabled);
  EXPECT_EQ(shape->scaling.original_max_positions, 8192);
  auto loaded = load_checkpoint(s.dir.string());
  ASSERT_TRUE(loaded) << describe(loaded.error());
  EXPECT_EQ(loaded->shape_problem(), "");
  EXPECT_EQ(loaded->embed, w.embed);
  for (uint32_t l = 0; l < 2; ++l) {
    EXPECT_EQ(loaded->layers[l].wq, w.layers[l].wq) << l;
    EXPECT_EQ(loaded->layers[l].attn_norm, w.layers[l].attn_norm) << l; // F32 on disk: exact back to bf16
    EXPECT_EQ(loaded->layers[l].w_up, w.layers[l].w_up) << l;
    EXPECT_EQ(loaded->layers[l].w_down, w.layers[l].w_down) << l;
  }
  EXPECT_EQ(loaded->lm_head, w.lm_head);
  EXPECT_EQ(loaded->final_norm, w.final_norm);
}

TEST(checkpoint, short_tensor_data_and_a_missing_file_are_located) {
  scratch s;
  auto w = model::seeded_weights(tiny(), 11);
  w.layers[1].wk.resize(w.layers[1].wk.size() / 2);
  write_checkpoint(s.dir, w);
  auto loaded = load_checkpoint(s.dir.string());
  ASSERT_FALSE(loaded);
  auto message = describe(loaded.error());
  // Shape [8, 16] but 64 values: the data does not fill the shape.
  EXPECT_NE(message.find("model-00002-of-00002.safetensors: tensor model.layers.1.self_attn.k_proj.weight: "
                         "data_offsets"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("hold 128 bytes, expected 256"), std::string::npos) << message;

  fs::remove(s.dir / "model.safetensors.index.json");
  loaded = load_checkpoint(s.dir.string());
  ASSERT_FALSE(loaded);
  message = describe(loaded.error());
  EXPECT_NE(message.find("model.safetensors: cannot open"), std::string::npos) << message;
}

TEST(checkpoint, a_byte_model_read_from_disk_measures_as_its_weights) {
  // The path `kvtier eval-quality` takes: a checkpoint folder, loaded, then
  // measured; the same numbers as the weights it was written from.
  scratch s;
  auto c = tiny();
  c.vocab = 256; // bytes are tokens
  auto w = model::seeded_weights(c, 5);
  write_checkpoint(s.dir, w);
  auto loaded = load_checkpoint(s.dir.string());
  ASSERT_TRUE(loaded) << describe(loaded.error());
  std::vector<uint8_t> text(3000);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = static_cast<uint8_t>("tiered kv cache "[i % 16]);
  compression::quality_options o;
  o.context_tokens = 128;
  o.continuation_tokens = 16;
  o.windows = 2;
  o.passkeys = 0;
  o.policies = {"random", "snapkv", "oracle"};
  o.quantizers = {"int8_token"};
  o.threads = 1;
  auto from_disk = compression::measure_quality(*loaded, text, o);
  auto in_memory = compression::measure_quality(w, text, o);
  ASSERT_TRUE(from_disk && in_memory);
  ASSERT_EQ(from_disk->rows.size(), 1u + 3 * 3 + 1);
  for (size_t i = 0; i < from_disk->rows.size(); ++i) {
    EXPECT_EQ(from_disk->rows[i].nats_per_byte, in_memory->rows[i].nats_per_byte) << from_disk->rows[i].name;
    EXPECT_GT(from_disk->rows[i].nats_per_byte, 0.0);
  }
}
