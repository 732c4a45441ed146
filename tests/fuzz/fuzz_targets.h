// The per-input bodies of the model-loader fuzzers, shared by the libFuzzer
// entry points and by corpus_test (which replays the corpus under g++ in CI).
// Beyond "does not crash", each checks the invariants a successful parse
// promises, trapping when one is broken so the fuzzer reports it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/model/config.h"
#include "engine/model/safetensors.h"

namespace gemma::fuzz {

inline void Require(bool condition) {
  if (!condition) __builtin_trap();
}

inline void CheckHeaderInvariants(const SafetensorsHeader& header, uint64_t file_size) {
  Require(header.data_offset >= 8 && header.data_offset <= file_size);
  const uint64_t data_size = file_size - header.data_offset;
  for (const auto& [name, info] : header.tensors) {
    Require(!name.empty() && name == info.name);
    Require(info.data_begin <= info.data_end && info.data_end <= data_size);
    for (int64_t d : info.shape) Require(d >= 0);
    const size_t element_bytes = DTypeSize(info.dtype);
    if (element_bytes != 0) {
      Require(static_cast<uint64_t>(info.num_elements()) * element_bytes ==
              info.data_end - info.data_begin);
    }
  }
}

inline void FuzzSafetensorsHeader(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto whole = ParseSafetensorsHeader(bytes, size, "fuzz");
  if (whole.ok()) CheckHeaderInvariants(*whole, size);
  // The same bytes as the head of a larger file, as when only the header is read.
  const uint64_t larger = uint64_t{size} + 4096;
  auto prefix = ParseSafetensorsHeader(bytes, larger, "fuzz");
  if (prefix.ok()) CheckHeaderInvariants(*prefix, larger);
}

inline void FuzzModelConfig(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = ParseModelConfig(text, "fuzz");
  if (!config.ok()) return;
  Require(static_cast<int>(config->layers.size()) == config->num_layers);
  Require(config->vocab_size > 0 && config->hidden_size > 0 && config->sliding_window > 0);
  Require(!config->eos_token_ids.empty());
  for (const LayerSpec& layer : config->layers) {
    Require(layer.head_dim > 0 && layer.head_dim % 2 == 0 && layer.num_kv_heads > 0);
    Require(config->num_heads % layer.num_kv_heads == 0);
    Require(layer.rope_pairs >= 1 && layer.rope_pairs <= layer.head_dim / 2);
    Require(layer.rope_theta > 1.0f);
    Require(!layer.k_eq_v || layer.is_global());
  }
  Require(config->num_parameters() > 0);
}

}  // namespace gemma::fuzz
