// Weights files that are not regular files: a FIFO that nobody writes to must
// be refused at once by the safetensors and .pt readers, which map files into memory,
// never waited on; a character device likewise.
#include "fifo_watchdog.hpp"
#include "store_test.hpp"

#include <kiln/store/safetensors.hpp>
#include <kiln/store/torch.hpp>

#include <sys/stat.h>

namespace kiln::store::test {
namespace {

using kiln::test::waits_on;

TEST(StoreFifo, WeightsReadersRefuseAFifoAtOnce) {
  TempDir dir;
  const std::filesystem::path fifo = dir / "weights.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string name = fifo.string();
  EXPECT_FALSE(waits_on(fifo, [&] {
    EXPECT_KILN_ERROR(SafetensorsFile::open(fifo), name, "is a FIFO (named pipe), not a regular file");
  }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(load_safetensors(fifo), name, "is a FIFO"); }));
  EXPECT_FALSE(waits_on(fifo, [&] { EXPECT_KILN_ERROR(load_torch(fifo), name, "is a FIFO"); }));
  EXPECT_KILN_ERROR(SafetensorsFile::open("/dev/zero"), "/dev/zero", "is a character device, not a regular file");
}

}  // namespace
}  // namespace kiln::store::test
