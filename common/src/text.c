/* atsc/text.h: escaping outside text for one-line messages. */
#include "atsc/text.h"

#include <stdio.h>

/* length of the valid UTF-8 sequence starting at s[i] (< n), or 0 when s[i] does not start one */
static size_t utf8_len(const unsigned char *s, size_t i, size_t n)
{
    unsigned char c = s[i];
    size_t k;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) k = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, min = 0x10000;
    else return 0;
    if (i + k > n) return 0;
    unsigned cp = c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
        if ((s[i + j] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i + j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0; /* overlong, surrogate */
    return k;
}

const char *atsc_esc(const char *s, size_t n, char *out, size_t len)
{
    const size_t max = len >= 12 ? (len - 8) / 4 : 1;
    const unsigned char *u = (const unsigned char *)s;
    char *o = out;
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        size_t k = c >= 0x80 ? utf8_len(u, i, n) : 1;
        if (i + (k ? k : 1) > max) break;
        if (c == '\n') o += sprintf(o, "\\n");
        else if (c == '\t') o += sprintf(o, "\\t");
        else if (c == '\r') o += sprintf(o, "\\r");
        else if (c < 0x20 || c == 0x7f || k == 0) o += sprintf(o, "\\x%02x", c);
        else
            for (size_t j = 0; j < k; j++) *o++ = (char)u[i + j];
        i += k ? k : 1;
    }
    if (i < n) o += sprintf(o, "...");
    *o = '\0';
    return out;
}
