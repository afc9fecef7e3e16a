// CIFAR-10 and CIFAR-100 in their binary format: fixed-size records of label byte(s)
// followed by 3072 pixel bytes (1024 red, 1024 green, 1024 blue, row-major 32 × 32). The
// images come out as u8 [N, 3, 32, 32]. A file that is not a whole number of records, or
// a label out of range, is a kiln::Error naming the reader, the file, the record and the
// byte. Files may be gzip-compressed. Compiled into kiln::data.
#pragma once

#include "kiln/data/image.hpp"

#include <filesystem>
#include <span>

namespace kiln::data {

// CIFAR-10 records (1 label byte in 0..9 + 3072 pixels) of one or more files, in order.
ImageSet read_cifar10(std::span<const std::filesystem::path> files);
ImageSet read_cifar10(const std::filesystem::path& file);

// Which of a CIFAR-100 record's two labels to keep: the coarse one (0..19, byte 0) or the
// fine one (0..99, byte 1).
enum class CifarLabels { coarse, fine };
ImageSet read_cifar100(const std::filesystem::path& file, CifarLabels labels = CifarLabels::fine);

// From the directories the archives unpack to: cifar-10-batches-bin (data_batch_1.bin ..
// data_batch_5.bin, test_batch.bin) and cifar-100-binary (train.bin, test.bin).
ImageSet cifar10(Split split, const std::filesystem::path& directory);
ImageSet cifar100(Split split, const std::filesystem::path& directory, CifarLabels labels = CifarLabels::fine);

}  // namespace kiln::data
