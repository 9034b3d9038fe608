//===- Translations.cpp - terra-translate registrations -------------------===//
#include "terra/Translate/Translations.h"

void terra::registerTerraTranslations() {}
