//===- Translations.h - terra-translate registrations -----------*- C++ -*-===//
#ifndef TERRA_TRANSLATE_TRANSLATIONS_H
#define TERRA_TRANSLATE_TRANSLATIONS_H

namespace terra {
/// Registers --import-trace and --terra-to-dot.
void registerTerraTranslations();
} // namespace terra

#endif // TERRA_TRANSLATE_TRANSLATIONS_H
