/* Placeholder translation unit for a library with no sources yet (bootstrap only). */
typedef int ats_empty_translation_unit;
