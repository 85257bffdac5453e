// The tiers under the pool as the serving engine builds them from its options (--cache-dir /
// --cache-disk-gb): the model fingerprint that names and seeds their blocks, and the tiers
// (tier/tier.h opens each medium the options ask for).
//
// The fingerprint is a canonical text of everything that decides a KV block's bits, one
// key=value per line: the weights' SHA-256 (of the file, or of every file of a model folder;
// a preset's name, its weights being seeded), the numerics (each weight type and what it
// multiplies with on this CPU, the KV dtype, the block size, the scan chunk), the model's KV
// config (architecture, layers, heads, RoPE and its scaling), the tokenizer's vocabulary size,
// and --cache-namespace. A different model, another quant of it, another KV dtype or block size
// reads none of another's blocks. The weights' digest is kept in <cache-dir>/weights/ keyed by
// the file's identity (path, size, mtime, inode), so a restart does not read the weights twice.
#pragma once

#include <memory>
#include <string>

#include "core/dtype.h"
#include "models/ssm_state.h"
#include "models/transformer.h"
#include "runner/serving_options.h"
#include "tier/tier.h"

namespace radixlm::runner {

// weights_path: the model file or folder (or a preset's name) the weights came from.
// rings: the window rings serving uses (WindowRingsFor; none: every layer paged).
core::StatusOr<std::string> ModelFingerprint(const std::string& weights_path, const models::Transformer& model,
                                             core::DType kv_dtype, const ServingOptions& o, const std::string& cache_dir,
                                             const models::WindowRings& rings = {});
// Null when the options ask for no tier. Errors: a medium cannot be used, a bad bound. A model
// with recurrent layers keeps its KV blocks and the recurrent states its hybrid cache keeps there.
core::StatusOr<std::unique_ptr<tier::Tier>> MakeTiers(const std::string& weights_path, const models::Transformer& model,
                                                      core::DType kv_dtype, const ServingOptions& o,
                                                      const models::WindowRings& rings = {});

}  // namespace radixlm::runner
