// libFuzzer target: bytes → kiln::data::decode_image (stb_image: PNG, JPEG, BMP, PPM/PGM,
// TGA, GIF...), as the file's channels and as RGB, with a pixel limit of 2^20 so that a
// header that lies cannot make the fuzzer allocate much. Any input must be rejected with
// kiln::Error or give u8 [C, H, W] within the limit.
#include <kiln/data/image_folder.hpp>

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const int channels : {0, 3}) {
    try {
      const kiln::TensorData image = kiln::data::decode_image(std::span(data, size), "fuzz.img", channels, 1u << 20);
      if (image.shape().rank() != 3 || image.shape()[1] * image.shape()[2] > (1 << 20)) std::abort();
    } catch (const kiln::Error&) {
    }
  }
  return 0;
}
