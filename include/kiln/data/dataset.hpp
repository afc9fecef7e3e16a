// The Dataset concept (size() and get(i)) and the datasets that combine others: InMemory,
// Mapped (a transform on get), Partial and split, Shuffled, Concat and Windows. Datasets are
// values that are cheap to copy (items live behind shared pointers) and read-only, so that
// loader workers can read one dataset from many threads at once.
#pragma once

#include "kiln/core/error.hpp"
#include "kiln/data/random.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::data {

// A dataset: `size()` items, `get(i)` returns item i by value (or by const reference) for
// i < size(). get must be safe to call from several threads at once.
template <class D>
concept Dataset = std::copy_constructible<D> && requires(const D& dataset, std::size_t i) {
  { dataset.size() } -> std::convertible_to<std::size_t>;
  dataset.get(i);
  requires !std::is_void_v<decltype(dataset.get(i))>;
};

template <Dataset D> using ItemOf = std::remove_cvref_t<decltype(std::declval<const D&>().get(std::size_t{}))>;

// Item i as epoch `epoch` sees it. A dataset whose items depend on the epoch (one with a
// random transform somewhere below it) has get(i, epoch); every combinator here does and
// passes the epoch down; a plain dataset has get(i) only.
template <Dataset D> ItemOf<D> get_item(const D& dataset, std::size_t i, std::uint64_t epoch) {
  if constexpr (requires { dataset.get(i, epoch); })
    return dataset.get(i, epoch);
  else
    return dataset.get(i);
}

namespace detail {
inline void check_index(const char* dataset, std::size_t i, std::size_t size) {
  KILN_CHECK(i < size, "{}: index {} is out of range for a dataset of {} items", dataset, i, size);
}
}  // namespace detail

// ---- InMemory: a vector of items, shared by copies.
template <class Item> class InMemory {
 public:
  InMemory() : items_(std::make_shared<const std::vector<Item>>()) {}
  explicit InMemory(std::vector<Item> items) : items_(std::make_shared<const std::vector<Item>>(std::move(items))) {}

  std::size_t size() const { return items_->size(); }
  const Item& get(std::size_t i) const {
    detail::check_index("InMemory", i, size());
    return (*items_)[i];
  }
  const std::vector<Item>& items() const { return *items_; }

 private:
  std::shared_ptr<const std::vector<Item>> items_;
};

template <class Item> InMemory<Item> in_memory(std::vector<Item> items) { return InMemory<Item>(std::move(items)); }

// ---- Mapped: applies `transform` to each item on get. The transform is called as
// transform(item, Sample{i, epoch}) when it accepts that (random transforms do), else as
// transform(item). It is called from loader workers: it must not change shared state.
template <Dataset D, class F> class Mapped {
 public:
  Mapped(D inner, F transform) : inner_(std::move(inner)), transform_(std::move(transform)) {}

  std::size_t size() const { return inner_.size(); }
  auto get(std::size_t i, std::uint64_t epoch = 0) const {
    detail::check_index("Mapped", i, size());
    if constexpr (std::is_invocable_v<const F&, ItemOf<D>, Sample>)
      return std::invoke(transform_, get_item(inner_, i, epoch), Sample{i, epoch});
    else
      return std::invoke(transform_, get_item(inner_, i, epoch));
  }
  const D& inner() const { return inner_; }

 private:
  D inner_;
  F transform_;
};

template <Dataset D, class F> Mapped<D, F> map(D dataset, F transform) {
  return Mapped<D, F>(std::move(dataset), std::move(transform));
}

// ---- Partial: items [begin, end) of another dataset.
template <Dataset D> class Partial {
 public:
  Partial(D inner, std::size_t begin, std::size_t end) : inner_(std::move(inner)), begin_(begin), end_(end) {
    KILN_CHECK(begin <= end && end <= inner_.size(), "Partial: range [{}, {}) does not fit in a dataset of {} items",
               begin, end, inner_.size());
  }

  std::size_t size() const { return end_ - begin_; }
  ItemOf<D> get(std::size_t i, std::uint64_t epoch = 0) const {
    detail::check_index("Partial", i, size());
    return get_item(inner_, begin_ + i, epoch);
  }
  std::size_t begin_index() const { return begin_; }
  std::size_t end_index() const { return end_; }

 private:
  D inner_;
  std::size_t begin_, end_;
};

// The first round(fraction * size) items and the rest. Splits in order: shuffle first
// (data::shuffle) for a random split.
template <Dataset D> std::pair<Partial<D>, Partial<D>> split(const D& dataset, double fraction) {
  KILN_CHECK(fraction >= 0.0 && fraction <= 1.0, "split: fraction {} is not in [0, 1]", fraction);
  const std::size_t n = dataset.size();
  const auto first = static_cast<std::size_t>(std::llround(fraction * static_cast<double>(n)));
  return {Partial<D>(dataset, 0, first), Partial<D>(dataset, first, n)};
}

// Consecutive parts of the given sizes, which must add up to the dataset's size.
template <Dataset D> std::vector<Partial<D>> split(const D& dataset, const std::vector<std::size_t>& sizes) {
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  KILN_CHECK(total == dataset.size(), "split: the sizes [{}] add up to {}, but the dataset has {} items",
             fmt::join(sizes, ", "), total, dataset.size());
  std::vector<Partial<D>> parts;
  std::size_t begin = 0;
  for (const std::size_t size : sizes) {
    parts.emplace_back(dataset, begin, begin + size);
    begin += size;
  }
  return parts;
}

// ---- Shuffled: the items in a fixed random order drawn from `seed`.
template <Dataset D> class Shuffled {
 public:
  Shuffled(D inner, std::uint64_t seed)
      : inner_(std::move(inner)),
        order_(std::make_shared<const std::vector<std::size_t>>(
            permutation(inner_.size(), stream_key(seed, /*purpose: shuffled dataset*/ 1, 0)))) {}

  std::size_t size() const { return order_->size(); }
  ItemOf<D> get(std::size_t i, std::uint64_t epoch = 0) const {
    detail::check_index("Shuffled", i, size());
    return get_item(inner_, (*order_)[i], epoch);
  }
  // Item i of this dataset is item order()[i] of the inner one.
  const std::vector<std::size_t>& order() const { return *order_; }

 private:
  D inner_;
  std::shared_ptr<const std::vector<std::size_t>> order_;
};

template <Dataset D> Shuffled<D> shuffle(D dataset, std::uint64_t seed) {
  return Shuffled<D>(std::move(dataset), seed);
}

// ---- Concat: the items of each dataset in turn; all must have the same item type.
template <Dataset First, Dataset... Rest>
requires(std::same_as<ItemOf<First>, ItemOf<Rest>>&&...) class Concat {
 public:
  explicit Concat(First first, Rest... rest) : parts_(std::move(first), std::move(rest)...) {}

  std::size_t size() const {
    return std::apply([](const auto&... part) { return (std::size_t{0} + ... + part.size()); }, parts_);
  }
  ItemOf<First> get(std::size_t i, std::uint64_t epoch = 0) const {
    detail::check_index("Concat", i, size());
    std::optional<ItemOf<First>> item;
    std::size_t offset = i;
    // Walks the parts, subtracting each one's size until the offset falls inside one.
    std::apply(
        [&](const auto&... part) {
          (void)((offset < part.size() ? (item.emplace(get_item(part, offset, epoch)), true)
                                       : (offset -= part.size(), false)) ||
                 ...);
        },
        parts_);
    return std::move(*item);
  }

 private:
  std::tuple<First, Rest...> parts_;
};

template <Dataset First, Dataset... Rest> Concat<First, Rest...> concat(First first, Rest... rest) {
  return Concat<First, Rest...>(std::move(first), std::move(rest)...);
}

// ---- Windows: item i is the `length` consecutive items starting at i * stride (a
// std::vector). A dataset shorter than one window has no windows.
template <Dataset D> class Windows {
 public:
  Windows(D inner, std::size_t length, std::size_t stride = 1)
      : inner_(std::move(inner)), length_(length), stride_(stride) {
    KILN_CHECK(length > 0, "Windows: the window length must be at least 1");
    KILN_CHECK(stride > 0, "Windows: the stride must be at least 1");
  }

  std::size_t size() const {
    const std::size_t n = inner_.size();
    return n < length_ ? 0 : (n - length_) / stride_ + 1;
  }
  std::vector<ItemOf<D>> get(std::size_t i, std::uint64_t epoch = 0) const {
    detail::check_index("Windows", i, size());
    std::vector<ItemOf<D>> window;
    window.reserve(length_);
    for (std::size_t k = 0; k < length_; ++k) window.push_back(get_item(inner_, i * stride_ + k, epoch));
    return window;
  }

 private:
  D inner_;
  std::size_t length_, stride_;
};

template <Dataset D> Windows<D> windows(D dataset, std::size_t length, std::size_t stride = 1) {
  return Windows<D>(std::move(dataset), length, stride);
}

}  // namespace kiln::data
