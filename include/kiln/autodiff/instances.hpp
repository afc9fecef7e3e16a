// Autodiff<B> compiled once, in B's library: the whole class (its out-of-class members:
// reshape, permute, expand) and its elementwise members for every op of the catalogue.
// Expanded with KILN_AUTODIFF_EXTERN (extern, or empty for the definitions) and
// KILN_AUTODIFF_INNER (the backend) defined:
//
//   #define KILN_AUTODIFF_EXTERN extern
//   #define KILN_AUTODIFF_INNER kiln::Cpu
//   KILN_AUTODIFF_INSTANCES
//
// kiln/<backend>/instances.hpp does that for its backend; see kiln/nn/instances.hpp.
#pragma once

#include "kiln/autodiff/backend.hpp"
#include "kiln/ops/elementwise.hpp"

#define KILN_AUTODIFF_UNARY_INSTANCE(Op)                                                                  \
  KILN_AUTODIFF_EXTERN template ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive                          \
  kiln::Autodiff<KILN_AUTODIFF_INNER>::unary<::kiln::ops::Op>(const ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive&);
#define KILN_AUTODIFF_BINARY_INSTANCE(Op)                                                                 \
  KILN_AUTODIFF_EXTERN template ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive                          \
  kiln::Autodiff<KILN_AUTODIFF_INNER>::binary<::kiln::ops::Op>(const ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive&, \
                                                               const ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive&); \
  KILN_AUTODIFF_EXTERN template ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive                          \
  kiln::Autodiff<KILN_AUTODIFF_INNER>::binary_scalar<::kiln::ops::Op>(                                    \
      const ::kiln::Autodiff<KILN_AUTODIFF_INNER>::Primitive&, double);

#define KILN_AUTODIFF_INSTANCES                                         \
  KILN_AUTODIFF_EXTERN template struct ::kiln::Autodiff<KILN_AUTODIFF_INNER>; \
  KILN_UNARY_OPS(KILN_AUTODIFF_UNARY_INSTANCE)                          \
  KILN_BINARY_OPS(KILN_AUTODIFF_BINARY_INSTANCE)
