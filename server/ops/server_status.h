// GetServerStatus: the engine's load figures as a proto, for a gateway that
// routes by load (the same numbers /metrics exposes).
#pragma once

#include "engine/core/engine.h"
#include "gemma/v1/gemma.pb.h"

namespace gemma::server::ops {

void FillServerStatus(const EngineStats& stats, v1::ServerStatus* status);

}  // namespace gemma::server::ops
