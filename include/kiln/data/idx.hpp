// IDX files (the format of MNIST and Fashion-MNIST): a big-endian header of two zero bytes,
// a type code and the number of dims, the dims as 32-bit integers, then the elements.
// Plain or gzip-compressed (recognized by content, not by name; a gzip stream is inflated
// no further than the header says the data reaches). A malformed file is a kiln::Error
// naming the reader, the file and the bytes at fault. Compiled into kiln::data.
#pragma once

#include "kiln/core/tensor_data.hpp"
#include "kiln/data/image.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

namespace kiln::data {

// The tensor of an IDX file: ubyte → u8, byte and short → i32, int → i32, float → f32,
// double → f64, with the file's dims as its shape.
TensorData read_idx(const std::filesystem::path& path);
// The same from bytes in memory (gzip-compressed or not); `name` stands for the file in errors.
TensorData parse_idx(std::span<const std::uint8_t> bytes, std::string_view name);

// An MNIST-style pair of files: images (ubyte, [N, rows, cols]) and labels (ubyte, [N]),
// each label below `classes`. The images are u8 [N, rows, cols].
ImageSet read_mnist(const std::filesystem::path& images, const std::filesystem::path& labels, std::size_t classes = 10);

// MNIST from a directory holding train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each plain or with ".gz".
ImageSet mnist(Split split, const std::filesystem::path& directory);

// Where Debian's dataset-fashion-mnist package puts Fashion-MNIST.
inline constexpr std::string_view fashion_mnist_directory = "/usr/share/datasets/fashion-mnist";
// Fashion-MNIST (the same four files as MNIST), with its ten class names.
ImageSet fashion_mnist(Split split, const std::filesystem::path& directory = fashion_mnist_directory);

}  // namespace kiln::data
