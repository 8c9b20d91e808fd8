#pragma once
// The one place that decides which engine moves the slot file's bytes: the
// probe's choice (probe.hpp) set up over this file and these buffers, the
// thread pool where io_uring was refused or its set-up fails here, and the
// caller's decorator (fault injection in tests) around either.
//
// Invariant: it always returns an engine; when it falls back, `probe` says
// which engine is in use and why.

#include "io/nvme_options.hpp"
#include "io/page_file.hpp"
#include "io/probe.hpp"

#include <memory>

namespace kvtier::io {

std::unique_ptr<page_file> select_engine(const nvme_options& options, int fd, const io_buffers& buffers,
                                         probe_result& probe);

} // namespace kvtier::io
