//===- Translations.h - terra-translate registrations -----------*- C++ -*-===//
#ifndef TERRA_TRANSLATE_TRANSLATIONS_H
#define TERRA_TRANSLATE_TRANSLATIONS_H

namespace terra {
/// Registers --import-trace and --terra-to-dot (with its option
/// --terra-dot-data-flow), see docs/trace-format.md, and
/// --gpu-binary-to-ptx, see docs/gpu.md.
void registerTerraTranslations();
} // namespace terra

#endif // TERRA_TRANSLATE_TRANSLATIONS_H
