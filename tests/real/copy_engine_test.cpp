// kvtier::copy_engine over the CPU twin: completions arrive as actor
// messages with the job's tag and bytes; bytes land where the job said.

#include "real/copy_engine.hpp"
#include "tests/kernels/copy_test_support.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <gtest/gtest.h>

using namespace kvtier;
using namespace std::chrono_literals;

namespace {

copy_engine_options cpu_options() {
  copy_engine_options o;
  o.shape = {16, 32, 8, 256};
  o.device = "cpu";
  o.tuning.calibrate = false;
  o.tuning.host_threads = 2;
  return o;
}

} // namespace

TEST(copy_engine, completion_arrives_as_a_message_with_tag_and_bytes) {
  auto engine = make_copy_engine(cpu_options());
  ASSERT_FALSE(engine->on_gpu());
  EXPECT_EQ(engine->fallback_reason(), "");
  const uint64_t block = 8 * 256;
  for (uint32_t s = 0; s < 16; ++s)
    engine->write_slot(tier::hbm, s, copy::test::pattern(3, s, block));
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  copy_job down{tier::hbm, tier::dram, {{0, 31}, {5, 2}, {15, 16}}, 4242};
  engine->submit(down, caf::actor_cast<caf::actor>(self));
  bool got = false;
  self->receive(
      [&](completion_atom, uint64_t tag, uint64_t bytes, const caf::error& err) {
        got = true;
        EXPECT_EQ(tag, 4242u);
        EXPECT_EQ(bytes, 3 * block);
        EXPECT_FALSE(err);
      },
      caf::after(10s) >> [] { FAIL() << "no completion within 10 s"; });
  ASSERT_TRUE(got);
  auto want = copy::block_checksum(copy::test::pattern(3, 5, block));
  EXPECT_EQ(engine->slot_checksum(tier::dram, 2), want);
  EXPECT_EQ(engine->slot_checksum(tier::dram, 31), copy::block_checksum(copy::test::pattern(3, 0, block)));
  EXPECT_EQ(engine->d2h_counters().bytes, 3 * block);
  EXPECT_EQ(engine->h2d_counters().bytes, 0u);

  // Layer streaming: layers 2..3 of DRAM slot 2 into HBM slot 9.
  engine->submit_layers(copy_job{tier::dram, tier::hbm, {{2, 9}}, 7}, 2, 2, caf::actor_cast<caf::actor>(self));
  self->receive(
      [&](completion_atom, uint64_t tag, uint64_t bytes, const caf::error& err) {
        EXPECT_EQ(tag, 7u);
        EXPECT_EQ(bytes, 2 * 256u);
        EXPECT_FALSE(err);
      },
      caf::after(10s) >> [] { FAIL() << "the layers' completion did not come within 10 s"; });
  std::vector<std::byte> got_block(block);
  engine->read_slot(tier::hbm, 9, got_block);
  auto from = copy::test::pattern(3, 5, block);
  auto before = copy::test::pattern(3, 9, block);
  EXPECT_EQ(0, std::memcmp(got_block.data(), before.data(), 2 * 256));
  EXPECT_EQ(0, std::memcmp(got_block.data() + 512, from.data() + 512, 512));
  EXPECT_EQ(0, std::memcmp(got_block.data() + 1024, before.data() + 1024, block - 1024));
}

TEST(copy_engine, falls_back_to_the_cpu_twin_and_says_why) {
  auto o = cpu_options();
  o.device = "auto";
  std::string said;
  o.log = [&](const std::string& text) { said = text; };
  auto engine = make_copy_engine(o);
  if (engine->on_gpu())
    GTEST_SKIP() << "a GPU is usable here: " << engine->name();
  EXPECT_NE(engine->fallback_reason(), "");
  EXPECT_NE(said.find("CPU twin"), std::string::npos) << said;
  EXPECT_NE(said.find(engine->fallback_reason()), std::string::npos) << said;
}
