// busyCoresBetween: the busy-cores notice counts only the CPUs this process may run on.
#include <gtest/gtest.h>
#include "RunSupport.h"

namespace {
using tfmc::busyCoresBetween;
// Two snapshots 100 jiffies apart per CPU: cpu0 fully busy (user), cpu1 idle, cpu2 half busy
// (system + irq); the all-CPU line says something else on purpose, so reading it would show.
const char *kBefore =
    "cpu  999 0 999 999 0 0 0 0 0 0\n"
    "cpu0 1000 0 0 500 0 0 0 0 0 0\n"
    "cpu1 0 0 0 1500 0 0 0 0 0 0\n"
    "cpu2 0 0 200 800 10 0 0 0 0 0\n"
    "intr 12345\n";
const char *kAfter =
    "cpu  1 1 1 1 0 0 0 0 0 0\n"
    "cpu0 1100 0 0 500 0 0 0 0 0 0\n"
    "cpu1 0 0 0 1600 0 0 0 0 0 0\n"
    "cpu2 0 0 240 850 10 10 0 0 0 0\n"
    "intr 23456\n";

TEST(BusyCores, CountsEveryCpuWithoutAMask) {
  // (100 + 0 + 50) busy of 300 jiffies, over 3 CPUs: 1.5 cores.
  EXPECT_DOUBLE_EQ(busyCoresBetween(kBefore, kAfter, {}), 1.5);
}

TEST(BusyCores, CountsOnlyTheAllowedCpus) {
  EXPECT_DOUBLE_EQ(busyCoresBetween(kBefore, kAfter, {1}), 0.0);   // the busy CPU is outside the set
  EXPECT_DOUBLE_EQ(busyCoresBetween(kBefore, kAfter, {0}), 1.0);
  EXPECT_DOUBLE_EQ(busyCoresBetween(kBefore, kAfter, {1, 2}), 0.5);
  EXPECT_DOUBLE_EQ(busyCoresBetween(kBefore, kAfter, {0, 2}), 1.5);
}

TEST(BusyCores, UnreadableSnapshotsGiveMinusOne) {
  EXPECT_EQ(busyCoresBetween("", kAfter, {}), -1);
  EXPECT_EQ(busyCoresBetween(kBefore, "cpu0 1 2\n", {}), -1);              // a short line
  EXPECT_EQ(busyCoresBetween(kBefore, kAfter, {7}), -1);                   // no allowed CPU listed
  EXPECT_EQ(busyCoresBetween(kAfter, kBefore, {}), -1);                    // time going backwards
}
}  // namespace
