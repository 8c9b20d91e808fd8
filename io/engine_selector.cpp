#include "io/engine_selector.hpp"

#include "io/threaded_page_file.hpp"
#include "io/uring_page_file.hpp"
#include "runtime/error.hpp"

namespace kvtier::io {

std::unique_ptr<page_file> select_engine(const nvme_options& options, int fd, const io_buffers& buffers,
                                         probe_result& probe) {
  std::unique_ptr<page_file> engine;
  if (probe.engine == engine_choice::uring) {
    uring_params p;
    p.fd = fd;
    p.queue_depth = options.queue_depth;
    p.sqpoll = options.sqpoll;
    p.register_buffers = options.register_buffers;
    p.buffers = buffers;
    auto ring = uring_page_file::open(p);
    if (ring) {
      engine = std::move(*ring);
    } else {
      probe.engine = engine_choice::threads;
      probe.engine_why = "io_uring setup failed: " + describe(ring.error());
    }
  }
  if (!engine)
    engine = std::make_unique<threaded_page_file>(fd, options.queue_depth, "");
  if (options.decorate)
    engine = options.decorate(std::move(engine));
  return engine;
}

} // namespace kvtier::io
