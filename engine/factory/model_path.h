// Where the embedded demo model lives, for tools started without --model.
#pragma once

#include <string>

namespace gemma {

// $GEMMA_MODEL_DIR if set; else the first existing of <exe>/../../models/
// gemma4-fortunes (a build tree), <exe>/../share/gemma-serve/models/
// gemma4-fortunes (an install), and the source tree's models/gemma4-fortunes;
// "" when none exists.
std::string DefaultModelDir();

}  // namespace gemma
