#include "io/faulty_page_file.hpp"

#include <cerrno>

namespace kvtier::io {

faulty_page_file::faulty_page_file(std::unique_ptr<page_file> inner, std::vector<fault_rule> rules)
    : inner_(std::move(inner)), rules_(std::move(rules)), seen_(rules_.size(), 0) {
  inner_->set_callback([this](uint64_t id, int64_t result) { on_inner(id, result); });
  deliverer_ = std::thread([this] { deliver(); });
}

faulty_page_file::~faulty_page_file() {
  inner_.reset(); // no more inner completions after this
  {
    mutex_lock lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  deliverer_.join();
}

std::string faulty_page_file::describe() const {
  return "fault injection over " + inner_->describe();
}

void faulty_page_file::set_callback(raw_callback cb) {
  callback_ = std::move(cb);
}

uint64_t faulty_page_file::injected() const {
  mutex_lock lock{mutex_};
  return injected_;
}

const fault_rule* faulty_page_file::match(const raw_io& io) {
  const fault_rule* fire = nullptr;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& r = rules_[i];
    if (r.dir != io.dir || (r.offset != ~uint64_t{0} && r.offset != io.offset && r.offset != io.payload_offset))
      continue;
    uint64_t n = seen_[i]++;
    if (!fire && n >= r.first && n - r.first < r.count)
      fire = &r;
  }
  return fire;
}

void faulty_page_file::submit(std::span<const raw_io> batch) {
  std::vector<raw_io> pass;
  {
    mutex_lock lock{mutex_};
    for (raw_io r : batch) {
      const fault_rule* rule = match(r);
      if (!rule) {
        pass.push_back(r);
        continue;
      }
      ++injected_;
      switch (rule->kind) {
        case fault::eio:
        case fault::enospc:
          // Failed by the "device" without touching it; delivered asynchronously, as a device would.
          deferred_.push_back({std::chrono::steady_clock::now(), r.id, rule->kind == fault::eio ? -EIO : -ENOSPC});
          continue;
        case fault::corrupt:
          if (r.dir == io_dir::write)
            r.header[24] ^= std::byte{0x5a}; // first byte of the block hash: the header checksum no longer holds
          else
            payloads_[r.id] = r.payload, sizes_[r.id] = r.payload_bytes;
          break;
        default:
          break;
      }
      armed_[r.id] = rule;
      pass.push_back(r);
    }
  }
  wake_.notify_all();
  if (!pass.empty())
    inner_->submit(pass);
}

void faulty_page_file::on_inner(uint64_t id, int64_t result) {
  const fault_rule* rule = nullptr;
  {
    mutex_lock lock{mutex_};
    auto it = armed_.find(id);
    if (it != armed_.end()) {
      rule = it->second;
      armed_.erase(it);
    }
    if (rule && rule->kind == fault::corrupt) {
      auto p = payloads_.find(id);
      if (p != payloads_.end()) {
        p->second[sizes_[id] / 2] ^= std::byte{0x01};
        payloads_.erase(p);
        sizes_.erase(id);
      }
    }
    if (rule && rule->kind == fault::lost) {
      lost_.emplace_back(id, result);
      return;
    }
    if (rule && rule->kind == fault::slow) {
      deferred_.push_back({std::chrono::steady_clock::now() + std::chrono::milliseconds{rule->delay_ms}, id, result});
      wake_.notify_all();
      return;
    }
  }
  if (rule && rule->kind == fault::short_io && result > 0)
    result = result / 2 / 512 * 512;
  callback_(id, result);
}

void faulty_page_file::release_lost() {
  std::vector<std::pair<uint64_t, int64_t>> out;
  {
    mutex_lock lock{mutex_};
    out.swap(lost_);
  }
  for (auto [id, result] : out)
    callback_(id, result);
}

void faulty_page_file::deliver() {
  mutex_lock lock{mutex_};
  for (;;) {
    if (stopping_ && deferred_.empty())
      return;
    auto now = std::chrono::steady_clock::now();
    std::vector<pending> due;
    auto next = now + std::chrono::hours{1};
    for (size_t i = 0; i < deferred_.size();) {
      if (deferred_[i].due <= now) {
        due.push_back(deferred_[i]);
        deferred_[i] = deferred_.back();
        deferred_.pop_back();
      } else {
        next = std::min(next, deferred_[i].due);
        ++i;
      }
    }
    if (!due.empty()) {
      lock.unlock();
      for (const auto& p : due)
        callback_(p.id, p.result);
      lock.lock();
      continue;
    }
    lock.wait_until(wake_, next);
  }
}

} // namespace kvtier::io
