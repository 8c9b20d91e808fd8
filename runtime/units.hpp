#pragma once
// Parsing and printing of sizes ("141GB", "64GiB") and token counts ("128k").
//
// Byte suffixes: KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of
// 1024, B or none is bytes. Token suffixes follow model cards, where a "128k"
// context is 131,072 tokens: k/K = 1024, m/M = 1024*1024.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier {

caf::expected<uint64_t> parse_bytes(std::string_view text);
caf::expected<uint64_t> parse_tokens(std::string_view text);

/// "1.50 GiB"-style rendering (binary units, 2 decimals).
std::string format_bytes(uint64_t bytes);
/// "327,680"-style rendering.
std::string format_count(uint64_t value);

} // namespace kvtier
