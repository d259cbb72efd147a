// Artifact internals exposed for tests.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmrt/artifact.h"

namespace tfmrt {

// serializeArtifact without validateArtifact: lets tests produce well-formed files (correct
// checksum) with structurally invalid content.
Status serializeArtifactUnchecked(const Artifact &artifact, std::vector<uint8_t> &bytes);

}  // namespace tfmrt
