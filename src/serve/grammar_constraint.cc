#include "serve/grammar_constraint.h"

#include <limits>

namespace radixlm::serve {

void GrammarConstraint::Mask(std::span<float> logits) {
  if (!matcher_ && !failed_) {
    const grammar::GrammarCache::Result& r = compiled_.get();
    if (r.ok()) matcher_.emplace(*r);
    else failed_ = true;
  }
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  if (failed_) {
    std::fill(logits.begin(), logits.end(), kOff);
    return;
  }
  const size_t vocab = static_cast<size_t>(matcher_->grammar().vocab().size());
  bits_.assign((vocab + 31) / 32, 0);
  matcher_->FillNextTokenMask(bits_);
  const size_t n = std::min(vocab, logits.size());
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t word = bits_[w];
    if (word == 0xFFFFFFFFu) continue;
    const size_t end = std::min(n, w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i)
      if (!(word >> (i - w * 32) & 1u)) logits[i] = kOff;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = kOff;  // padding rows past the tokenizer
}

std::string GrammarConstraint::failure() const {
  if (matcher_ && matcher_->over_budget())
    return "the output grammar's token mask exceeded its work budget (" + std::to_string(grammar::kStepFuel) +
           " units per token): the grammar is too costly to follow";
  return {};
}

void GrammarConstraint::Accept(int32_t token) {
  if (matcher_ && !matcher_->AcceptToken(token)) failed_ = true;
}

}  // namespace radixlm::serve
