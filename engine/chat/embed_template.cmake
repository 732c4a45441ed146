# Writes OUT, a C++ file defining gemma::kGemma4ChatTemplateSource as the
# bytes of IN (a raw string literal; the delimiter never occurs in templates).
file(READ ${IN} source)
string(FIND "${source}" ")gemma_template\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter")
endif()
file(WRITE ${OUT} "// Generated from ${IN} by embed_template.cmake.\n#include <string_view>\nnamespace gemma {\nextern const std::string_view kGemma4ChatTemplateSource;\nconst std::string_view kGemma4ChatTemplateSource = R\"gemma_template(${source})gemma_template\";\n}  // namespace gemma\n")
