#pragma once
// A shared memory region: a memfd (Unix socket) or a /dev/shm file (TCP on
// loopback, where no descriptor can be passed), mapped read-write in this
// process; the daemon maps the same pages. The region owns the mapping and
// the descriptor and unmaps on destruction.
//
// A CUDA application may cudaHostRegister(data(), size()) to DMA between the
// region and HBM; the region never moves while it exists.

#include "client/result.hpp"

#include <cstddef>
#include <string>

namespace kvtier::client {

class region {
public:
  /// A new anonymous region of at least `bytes` (rounded up to the page size).
  static result<region> create(std::size_t bytes);
  /// A new region backed by a named file under /dev/shm (`name` is returned
  /// by shm_name()), for daemons reached over TCP.
  static result<region> create_named(std::size_t bytes);

  region(region&& other) noexcept;
  region& operator=(region&& other) noexcept;
  region(const region&) = delete;
  region& operator=(const region&) = delete;
  ~region();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  int fd() const { return fd_; }
  /// The /dev/shm name of a named region; empty for a memfd.
  const std::string& shm_name() const { return shm_name_; }

private:
  region() = default;
  void reset();
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
  std::string shm_name_;
};

} // namespace kvtier::client
