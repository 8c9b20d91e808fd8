#include "node/router_actor.hpp"

#include "runtime/error.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <set>
#include <unordered_map>

namespace kvtier::node {

namespace {

using redial_atom = caf::atom_constant<caf::atom("redial")>;

constexpr auto redial_every = std::chrono::milliseconds(200);

struct member {
  member_config config;
  caf::actor handle;
  bool live = false;
  uint32_t in_flight = 0;
};

struct pending {
  request req;
  caf::typed_response_promise<request_result> promise;
  request_result result;
  std::string phase;
  size_t prefill_member = 0;
  size_t decode_member = 0;
  uint32_t attempt = 0;    // the decode attempt whose answer counts
  std::set<size_t> failed; // decode members that failed this request
  // The most tokens a decode node reported decoded with their blocks in the
  // store: a decode that moves resumes after them. Any node's report will do:
  // decoding is deterministic, so every node decodes the same tokens.
  std::vector<uint32_t> decoded;
};

struct router_state {
  node_config config;
  std::vector<member> members;
  std::unordered_map<uint64_t, pending> requests;
  size_t next_prefill = 0;
  std::function<void(uint64_t)> start_decode;

  std::string list(bool (*has_role)(node_role)) const {
    std::string out;
    for (const auto& m : members)
      if (has_role(m.config.role))
        out += (out.empty() ? "" : ", ") + m.config.name + (m.live ? " (live)" : " (down)");
    return out;
  }
};

bool can_prefill(node_role r) {
  return prefills(r);
}
bool can_decode(node_role r) {
  return decodes(r);
}

} // namespace

caf::behavior router_actor(caf::event_based_actor* self, node_config config) {
  auto st = std::make_shared<router_state>();
  st->config = std::move(config);
  for (auto& m : st->config.members)
    st->members.push_back({m, {}, false, 0});

  auto dial = [self, st](size_t i) {
    auto mm = self->system().middleman().actor_handle();
    const auto& c = st->members[i].config;
    self->request(mm, caf::infinite, caf::connect_atom::value, c.host, c.port)
        .then(
            [self, st, i](const caf::node_id&, caf::strong_actor_ptr& p, const std::set<std::string>&) {
              auto& m = st->members[i];
              if (!p) {
                self->delayed_send(self, redial_every, redial_atom::value, i);
                return;
              }
              m.handle = caf::actor_cast<caf::actor>(p);
              m.live = true;
              self->monitor(m.handle);
              fmt::print(stderr, "router: node {} ({}) is live at {}:{}\n", m.config.name, to_string(m.config.role),
                         m.config.host, m.config.port);
            },
            [self, i](caf::error&) { self->delayed_send(self, redial_every, redial_atom::value, i); });
  };
  for (size_t i = 0; i < st->members.size(); ++i)
    dial(i);

  // Sends request `id` to the live decode node with the fewest requests in
  // flight; answers the client with an error when none lives.
  // Raw pointers: the function lives in the state and runs only while the
  // actor does (its response handlers die with it), so no cycle keeps it.
  router_state* rs = st.get();
  st->start_decode = [self, st = rs](uint64_t id) {
    auto it = st->requests.find(id);
    if (it == st->requests.end())
      return;
    auto& p = it->second;
    size_t best = st->members.size();
    for (size_t i = 0; i < st->members.size(); ++i) {
      const auto& m = st->members[i];
      if (m.live && can_decode(m.config.role) && !p.failed.count(i) &&
          (best == st->members.size() || m.in_flight < st->members[best].in_flight))
        best = i;
    }
    if (best == st->members.size()) {
      p.promise.deliver(make_error(errc::no_capacity,
                                   "router: request " + std::to_string(id) +
                                       " has no live decode node to go to (decode nodes: " + st->list(can_decode) +
                                       ")"));
      st->requests.erase(it);
      return;
    }
    auto& m = st->members[best];
    ++m.in_flight;
    p.decode_member = best;
    auto attempt = ++p.attempt;
    p.result.decode_attempts = attempt;
    p.phase = "decode sent to " + m.config.name;
    p.req.decoded = p.decoded;
    self->request(m.handle, caf::infinite, decode_atom::value, p.req)
        .then(
            [st, id, attempt, best](decode_result& r) {
              auto open = st->requests.find(id);
              if (open == st->requests.end() || open->second.attempt != attempt)
                return;
              --st->members[best].in_flight;
              open->second.result.decode = std::move(r);
              open->second.promise.deliver(open->second.result);
              st->requests.erase(open);
            },
            [st, id, attempt, best](caf::error& e) {
              auto open = st->requests.find(id);
              if (open == st->requests.end() || open->second.attempt != attempt)
                return;
              --st->members[best].in_flight;
              if (e.category() == caf::atom("kvtier")) { // the node's own refusal
                open->second.promise.deliver(std::move(e));
                st->requests.erase(open);
                return;
              }
              open->second.failed.insert(best); // the transport failed: another node takes it
              st->start_decode(id);
            });
  };

  self->set_down_handler([self, st](caf::down_msg& dm) {
    for (size_t i = 0; i < st->members.size(); ++i) {
      auto& m = st->members[i];
      if (!m.handle || m.handle.address() != dm.source)
        continue;
      m.live = false;
      m.handle = nullptr;
      m.in_flight = 0;
      // The wall clock too, so that a script that killed the node can tell how long noticing took.
      auto unix_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      fmt::print(stderr, "router: node {} is down ({}) at unix_ns {}; its requests go elsewhere\n", m.config.name,
                 describe(dm.reason), unix_ns);
      std::vector<uint64_t> moved, lost;
      for (auto& [id, p] : st->requests)
        if (p.attempt > 0 && p.decode_member == i) {
          p.failed.insert(i);
          moved.push_back(id);
        } else if (p.attempt == 0 && p.prefill_member == i) {
          lost.push_back(id);
        }
      for (auto id : lost) { // a prefill is not retried: its client hears why
        auto it = st->requests.find(id);
        it->second.promise.deliver(make_error(errc::io_failure,
                                              "router: prefill node " + m.config.name +
                                                  " went down while prefilling request " + std::to_string(id)));
        st->requests.erase(it);
      }
      for (auto id : moved)
        st->start_decode(id);
      self->delayed_send(self, redial_every, redial_atom::value, i);
    }
  });

  return {
      [self, st](submit_atom, request& req) -> caf::result<request_result> {
        auto id = req.id;
        if (st->requests.count(id))
          return make_error(errc::invalid_argument, "router: request " + std::to_string(id) + " is already in flight");
        bool decode_lives = false;
        for (const auto& m : st->members)
          decode_lives |= m.live && can_decode(m.config.role);
        if (!decode_lives)
          return make_error(errc::no_capacity,
                            "router: no live decode node, request " + std::to_string(id) +
                                " refused (decode nodes: " + st->list(can_decode) + ")");
        size_t n = st->members.size(), chosen = n;
        for (size_t k = 0; k < n && chosen == n; ++k) {
          auto i = (st->next_prefill + k) % n;
          if (st->members[i].live && can_prefill(st->members[i].config.role))
            chosen = i;
        }
        if (chosen == n)
          return make_error(errc::no_capacity,
                            "router: no live prefill node, request " + std::to_string(id) +
                                " refused (prefill nodes: " + st->list(can_prefill) + ")");
        st->next_prefill = chosen + 1;
        pending p;
        p.req = std::move(req);
        p.promise = self->make_response_promise<request_result>();
        p.phase = "prefill sent to " + st->members[chosen].config.name;
        p.prefill_member = chosen;
        auto promise = p.promise;
        auto& stored = st->requests.emplace(id, std::move(p)).first->second;
        self->request(st->members[chosen].handle, caf::infinite, prefill_atom::value, stored.req)
            .then(
                [st, id](prefill_result& r) {
                  auto it = st->requests.find(id);
                  if (it == st->requests.end())
                    return;
                  it->second.result.prefill = std::move(r);
                  st->start_decode(id);
                },
                [st, id](caf::error& e) {
                  auto it = st->requests.find(id);
                  if (it == st->requests.end())
                    return;
                  it->second.promise.deliver(std::move(e));
                  st->requests.erase(it);
                });
        return promise;
      },
      [st](decode_started_atom, uint64_t id, const std::string& node) {
        auto it = st->requests.find(id);
        if (it != st->requests.end())
          it->second.phase = "decoding on " + node;
      },
      [st](decode_progress_atom, uint64_t id, std::vector<uint32_t>& decoded) {
        auto it = st->requests.find(id);
        if (it == st->requests.end() || decoded.size() <= it->second.decoded.size())
          return;
        auto& p = it->second;
        p.decoded = std::move(decoded);
        p.phase = fmt::format("decoding on {} ({} tokens checkpointed)", st->members[p.decode_member].config.name,
                              p.decoded.size());
      },
      [st](where_atom, uint64_t id) -> std::string {
        auto it = st->requests.find(id);
        return it == st->requests.end() ? std::string("unknown") : it->second.phase;
      },
      [st](live_atom) {
        std::vector<std::string> names;
        for (const auto& m : st->members)
          if (m.live)
            names.push_back(m.config.name);
        return names;
      },
      [st](members_atom) {
        std::vector<std::string> names;
        for (const auto& m : st->members)
          names.push_back(m.config.name);
        return names;
      },
      [dial](redial_atom, size_t i) { dial(i); },
  };
}

} // namespace kvtier::node
