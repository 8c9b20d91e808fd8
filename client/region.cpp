#include "client/region.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace kvtier::client {

namespace {

std::size_t round_to_pages(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

} // namespace

result<region> region::create(std::size_t bytes) {
  if (bytes == 0)
    return error{errc::bad_request, "a region of 0 bytes"};
  const int fd = ::memfd_create("kvtier-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return error{errc::system, std::string("memfd_create: ") + std::strerror(errno)};
  region r;
  const auto size = round_to_pages(bytes);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    return error{errc::system, std::string("ftruncate: ") + std::strerror(errno)};
  }
  // Sealed against shrinking: the daemon copies into these pages and refuses
  // a region that could vanish under it.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    ::close(fd);
    return error{errc::system, std::string("memfd seals: ") + std::strerror(errno)};
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return error{errc::system, std::string("mmap: ") + std::strerror(errno)};
  }
  r.data_ = static_cast<std::byte*>(p);
  r.size_ = size;
  r.fd_ = fd;
  return r;
}

result<region> region::create_named(std::size_t bytes) {
  if (bytes == 0)
    return error{errc::bad_request, "a region of 0 bytes"};
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  const std::string name =
      "/kvtier-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return error{errc::system, "shm_open " + name + ": " + std::strerror(errno)};
  region r;
  r.shm_name_ = name;
  const auto size = round_to_pages(bytes);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return error{errc::system, std::string("ftruncate: ") + std::strerror(errno)};
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    return error{errc::system, std::string("mmap: ") + std::strerror(errno)};
  }
  r.data_ = static_cast<std::byte*>(p);
  r.size_ = size;
  r.fd_ = fd;
  return r;
}

region::region(region&& other) noexcept
    : data_(other.data_), size_(other.size_), fd_(other.fd_), shm_name_(std::move(other.shm_name_)) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.fd_ = -1;
  other.shm_name_.clear();
}

region& region::operator=(region&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    shm_name_ = std::exchange(other.shm_name_, {});
  }
  return *this;
}

region::~region() {
  reset();
}

void region::reset() {
  if (data_)
    ::munmap(data_, size_);
  if (fd_ >= 0)
    ::close(fd_);
  if (!shm_name_.empty())
    ::shm_unlink(shm_name_.c_str());
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  shm_name_.clear();
}

} // namespace kvtier::client
