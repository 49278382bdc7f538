# Script mode helper for trainbench_embed: writes SOURCE's bytes as a C++ string constant.
file(READ ${SOURCE} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUTPUT}
  "// Generated from ${SOURCE}; do not edit.\n"
  "extern const char* const ${SYMBOL};\n"
  "static const char ${SYMBOL}_bytes[] = {${bytes} 0x00};\n"
  "const char* const ${SYMBOL} = ${SYMBOL}_bytes;\n")
