// einsum over Float tensors (torch.einsum), lowered to diagonals (strided slices), sums,
// permutes, reshapes and a batched matmul per pair of operands, so every backend, Autodiff and Fusion run
// and differentiate it. The result's rank is a template argument: einsum<2>("ij,jk->ik", a, b).
#pragma once

#include "kiln/tensor/tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {

// An operand on its way through einsum: a primitive and one label per dim.
template <class B> struct EinsumTerm {
  typename B::Primitive value;
  std::string labels;
};

inline std::string einsum_strip(std::string_view equation) {
  std::string out;
  for (char ch : equation)
    if (ch != ' ') out.push_back(ch);
  return out;
}

// Takes the diagonal of every label repeated within one operand ("ii" → "i").
template <class B> void einsum_diagonals(EinsumTerm<B>& t) {
  for (std::size_t p = 0; p < t.labels.size(); ++p) {
    const std::size_t q = t.labels.find(t.labels[p], p + 1);
    if (q == std::string::npos) continue;
    const Shape s = B::shape(t.value);
    KILN_CHECK(s[p] == s[q], "einsum: label '{}' has sizes {} and {} in one operand of shape {}", t.labels[p], s[p],
               s[q], s);
    std::vector<std::int64_t> order, dims;
    std::string labels;
    for (std::size_t i = 0; i < s.rank(); ++i) {
      if (i == p || i == q) continue;
      order.push_back(static_cast<std::int64_t>(i));
      dims.push_back(s[i]);
      labels.push_back(t.labels[i]);
    }
    order.insert(order.end(), {static_cast<std::int64_t>(p), static_cast<std::int64_t>(q)});
    const std::int64_t n = s[p];
    std::vector<ops::SliceRange> ranges;
    for (auto d : dims) ranges.push_back({0, d, 1});
    ranges.push_back({0, n, n + 1});
    dims.push_back(n * n);
    t.value = B::slice(B::reshape(B::permute(t.value, order), Shape(dims)), ranges);
    labels.push_back(t.labels[p]);
    t.labels = labels;
    p = static_cast<std::size_t>(-1);  // start over: the labels moved
  }
}

// Sums out the labels that no other operand and not the output name.
template <class B> void einsum_sum_private(EinsumTerm<B>& t, const std::string& keep) {
  std::vector<std::int64_t> dims;
  std::string labels;
  const Shape s = B::shape(t.value);
  for (std::size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.find(t.labels[i]) != std::string::npos) {
      dims.push_back(s[i]);
      labels.push_back(t.labels[i]);
    } else {
      t.value = B::reduce(t.value, ops::ReduceOp::sum, static_cast<std::int64_t>(i));
    }
  }
  if (dims.empty()) dims.push_back(1);  // Kiln's scalar
  if (labels.size() != t.labels.size()) t.value = B::reshape(t.value, Shape(dims));
  t.labels = labels;
}

// Permutes t so that its labels read `order` (a permutation of them).
template <class B> typename B::Primitive einsum_arrange(const EinsumTerm<B>& t, const std::string& order) {
  if (t.labels == order || order.empty()) return t.value;
  std::vector<std::int64_t> dims;
  for (char ch : order) dims.push_back(static_cast<std::int64_t>(t.labels.find(ch)));
  return B::permute(t.value, dims);
}

template <class B> std::int64_t einsum_size(const EinsumTerm<B>& t, const std::string& labels) {
  const Shape s = B::shape(t.value);
  std::int64_t n = 1;
  for (char ch : labels) n *= s[t.labels.find(ch)];
  return n;
}

// Contracts two operands as one batched matmul, [batch, a_only, shared] @ [batch, shared,
// b_only]: labels in both that `keep` names are batch dims, the others are summed.
template <class B>
EinsumTerm<B> einsum_contract(const EinsumTerm<B>& a, const EinsumTerm<B>& b, const std::string& keep) {
  std::string batch, contracted, a_only, b_only;
  for (char ch : a.labels) {
    const bool in_b = b.labels.find(ch) != std::string::npos, kept = keep.find(ch) != std::string::npos;
    (in_b ? (kept ? batch : contracted) : a_only).push_back(ch);
  }
  for (char ch : b.labels)
    if (a.labels.find(ch) == std::string::npos) b_only.push_back(ch);
  for (char ch : batch + contracted) {
    const std::int64_t sa = einsum_size(a, std::string(1, ch)), sb = einsum_size(b, std::string(1, ch));
    KILN_CHECK(sa == sb, "einsum: label '{}' has sizes {} and {} in two operands", ch, sa, sb);
  }
  const std::int64_t nb = einsum_size(a, batch), na = einsum_size(a, a_only), nc = einsum_size(a, contracted),
                     nbo = einsum_size(b, b_only);
  const auto left = B::reshape(einsum_arrange(a, batch + a_only + contracted), Shape{nb, na, nc});
  const auto right = B::reshape(einsum_arrange(b, batch + contracted + b_only), Shape{nb, nc, nbo});
  std::vector<std::int64_t> dims;
  const Shape sa = B::shape(a.value), sb = B::shape(b.value);
  for (char ch : batch + a_only) dims.push_back(sa[a.labels.find(ch)]);
  for (char ch : b_only) dims.push_back(sb[b.labels.find(ch)]);
  if (dims.empty()) dims.push_back(1);
  return {B::reshape(B::matmul(left, right), Shape(dims)), batch + a_only + b_only};
}

// The operands' labels of an equation's inputs ("ij,jk" → "ij", "jk").
inline std::vector<std::string> einsum_operands(const std::string& inputs) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = inputs.find(',', start);
    parts.push_back(inputs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// The equation with each "..." spelled out as letters the equation does not use: an operand's
// "..." stands for its dims that the letters do not name, the last ones of the widest such
// run (aligned on the right, as torch); the output's "..." (or, without "->", the start of the
// implicit output) takes the whole run.
inline std::string einsum_expand_ellipsis(std::string_view equation, const std::string& eq,
                                          const std::vector<std::size_t>& ranks) {
  if (eq.find('.') == std::string::npos) return eq;
  const std::size_t arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  std::vector<std::string> parts = einsum_operands(inputs);
  KILN_CHECK(parts.size() == ranks.size(), "einsum: \"{}\" names {} operands, {} given", equation, parts.size(),
             ranks.size());
  std::vector<std::size_t> widths(parts.size(), 0);
  std::size_t widest = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t at = parts[i].find("...");
    KILN_CHECK(parts[i].find('.') == at && (at == std::string::npos || parts[i].find('.', at + 3) == std::string::npos),
               "einsum: operand {} of \"{}\" has a '.' that is not one \"...\"", i, equation);
    if (at == std::string::npos) continue;
    const std::size_t named = parts[i].size() - 3;
    KILN_CHECK(ranks[i] >= named, "einsum: operand {} has rank {}, \"{}\" names {} dims besides its \"...\"", i,
               ranks[i], equation, named);
    widths[i] = ranks[i] - named;
    widest = std::max(widest, widths[i]);
  }
  std::string fresh;
  for (char ch = 'A'; ch <= 'Z' && fresh.size() < widest; ++ch)
    if (eq.find(ch) == std::string::npos) fresh.push_back(ch);
  for (char ch = 'a'; ch <= 'z' && fresh.size() < widest; ++ch)
    if (eq.find(ch) == std::string::npos) fresh.push_back(ch);
  KILN_CHECK(fresh.size() == widest, "einsum: \"{}\" leaves too few unused letters for its \"...\"", equation);
  std::string out, once;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t at = parts[i].find("...");
    if (at != std::string::npos) parts[i].replace(at, 3, fresh.substr(widest - widths[i]));
    out += (i ? "," : "") + parts[i];
  }
  if (arrow != std::string::npos) {
    std::string output = eq.substr(arrow + 2);
    const std::size_t at = output.find("...");
    if (at != std::string::npos) output.replace(at, 3, fresh);
    return out + "->" + output;
  }
  // Implicit output: the "..." dims, then the named labels that appear once, alphabetically.
  std::string named;
  for (const std::string& part : parts) named += part;
  for (char ch : named)
    if (fresh.find(ch) == std::string::npos && std::count(named.begin(), named.end(), ch) == 1) once.push_back(ch);
  std::sort(once.begin(), once.end());
  return out + "->" + fresh + once;
}

template <class B>
typename B::Primitive einsum_impl(std::string_view equation, std::vector<EinsumTerm<B>> terms, std::size_t rank) {
  std::vector<std::size_t> ranks;
  for (const auto& t : terms) ranks.push_back(B::shape(t.value).rank());
  const std::string eq = einsum_expand_ellipsis(equation, einsum_strip(equation), ranks);
  const std::size_t arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  const std::vector<std::string> labels = einsum_operands(inputs);
  KILN_CHECK(labels.size() == terms.size(), "einsum: \"{}\" names {} operands, {} given", equation, labels.size(),
             terms.size());
  std::string all;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const Shape s = B::shape(terms[i].value);
    KILN_CHECK(labels[i].size() == s.rank(), "einsum: operand {} of shape {} has rank {}, \"{}\" gives it {} labels", i,
               s, s.rank(), labels[i], labels[i].size());
    for (char ch : labels[i])
      KILN_CHECK((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'), "einsum: '{}' in \"{}\" is not a letter", ch,
                 equation);
    terms[i].labels = labels[i];
    all += labels[i];
  }
  std::string output;
  if (arrow != std::string::npos) {
    output = eq.substr(arrow + 2);
    for (std::size_t i = 0; i < output.size(); ++i) {
      KILN_CHECK(all.find(output[i]) != std::string::npos, "einsum: output label '{}' of \"{}\" names no input dim",
                 output[i], equation);
      KILN_CHECK(output.find(output[i], i + 1) == std::string::npos, "einsum: output label '{}' of \"{}\" repeats",
                 output[i], equation);
    }
  } else {  // implicit: the labels that appear once, in alphabetical order
    for (char ch : all)
      if (std::count(all.begin(), all.end(), ch) == 1) output.push_back(ch);
    std::sort(output.begin(), output.end());
  }
  KILN_CHECK(output.size() == rank || (output.empty() && rank == 1),
             "einsum: \"{}\" gives a result of rank {}, the call asks for rank {}", equation, output.size(), rank);
  for (auto& t : terms) einsum_diagonals(t);
  // Each operand's own labels are summed first; then the operands contract left to right,
  // keeping the labels that the output or a later operand still needs.
  for (std::size_t i = 0; i < terms.size(); ++i) {
    std::string needed = output;
    for (std::size_t j = 0; j < terms.size(); ++j)
      if (j != i) needed += terms[j].labels;
    einsum_sum_private(terms[i], needed);
  }
  EinsumTerm<B> product = terms[0];
  for (std::size_t k = 1; k < terms.size(); ++k) {
    std::string keep = output;
    for (std::size_t j = k + 1; j < terms.size(); ++j) keep += terms[j].labels;
    product = einsum_contract(product, terms[k], keep);
  }
  return output.empty() ? product.value : einsum_arrange(product, output);
}

}  // namespace detail

// torch.einsum: "ij,jk->ik" (matmul), "bij,bjk->bik" (batched), "i,j->ij" (outer), "i,i->"
// (dot), "ii->i" (diagonal), "ii" (trace), "ijk->ik" (sum), "ij,jk,kl->il" (a chain). R is the
// result's rank; a result with no labels is Kiln's scalar, shape [1] (R = 1). Labels are
// letters, and "..." stands for the dims the letters leave unnamed ("...ij,...jk->...ik"); a
// label repeated in one operand takes its diagonal; without "->" the output is the "..."
// dims, then the labels that appear once, in alphabetical order, as in torch. Operands
// contract left to right; sizes must match (no broadcasting of size-1 dims).
template <std::size_t R, class B, std::size_t... Ds>
Tensor<B, R> einsum(std::string_view equation, const Tensor<B, Ds>&... operands) {
  static_assert(sizeof...(Ds) >= 1, "einsum: give at least one operand");
  return Tensor<B, R>(detail::einsum_impl<B>(equation, {detail::EinsumTerm<B>{operands.primitive(), {}}...}, R));
}

}  // namespace kiln
