/* webui.h - the web chat page served at / (src/server/webui/index.html,
 * embedded into the binary at build time by tools/embed.c; see the page's
 * own header comment for what it does and what it keeps in the browser).
 *
 * The page is static and the same in every binary, so the HTTP server
 * serves it without the API key; everything the page does goes through the
 * API, which needs the key (the page asks for it on a 401).
 */
#ifndef QW_WEBUI_H
#define QW_WEBUI_H

#include <stddef.h>

/* The page (UTF-8 HTML, NUL-terminated) and its length in bytes. Static
 * storage: never freed. */
const char *webui_page(size_t *len);

/* Response headers for the page: {name, value} pairs, NULL-terminated.
 * The Content-Security-Policy allows only the page's inline script and
 * style and connections to this origin (no other origin, no frames). */
extern const char *const webui_headers[][2];

#endif
