#pragma once
// What every trace reader promises about any text (sim/trace.hpp), checked on
// one fuzz input. Shared by the Mooncake, Azure and BurstGPT fuzz targets.
//
// The input is read three ways: strict, with skip_bad, and with
// max_requests = 1. Checked:
//  (1) a rejected trace is an error that names the file;
//  (2) an accepted trace keeps the header's invariants: ids 0..n-1, the
//      earliest arrival 0, every arrival finite and >= 0, no more block ids
//      than the input tokens need, stats.requests == n;
//  (3) what strict reading accepts, skip_bad accepts alike with nothing skipped;
//  (4) max_requests = 1 yields the first request of the full read;
//  (5) the ideal prefix reuse never hits more tokens than there are.

#include "sim/trace.hpp"

#include <string>
#include <string_view>

namespace kvtier::fuzz {

void check_trace_reader(std::string_view text, const std::string& name, sim::trace_format format);

} // namespace kvtier::fuzz
