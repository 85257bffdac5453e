// The seam a constraint on a request's output plugs into (a grammar: JSON Schema, GBNF, a tool
// call's format). The engine owns one object per sequence and calls it from one thread at a
// time: Mask before every draw of that sequence's next token, Accept with the token drawn.
// Implementations live above the engine (serve wraps the grammar module's matcher), so the
// engine samples constrained output without knowing what a grammar is.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace radixlm::sampling {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token the constraint forbids next to -infinity. Leaving none is a
  // broken constraint: the engine then ends the request with an error.
  virtual void Mask(std::span<float> logits) = 0;
  // The token appended to the sequence (one Mask allowed).
  virtual void Accept(int32_t token) = 0;
  // Why the last Mask left no token, when the constraint knows (a work budget ran out, say);
  // empty: the constraint's language simply allows nothing here.
  virtual std::string failure() const { return {}; }
};

}  // namespace radixlm::sampling
