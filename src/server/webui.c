/* webui.c - the embedded web chat page (webui.h). */
#include "server/webui.h"

/* build/gen/webui_page.c, written by tools/embed.c from
 * src/server/webui/index.html. */
extern const unsigned char qw_webui_index_html[];
extern const unsigned long qw_webui_index_html_len;

const char *webui_page(size_t *len) {
    *len = (size_t)qw_webui_index_html_len;
    return (const char *)qw_webui_index_html;
}

const char *const webui_headers[][2] = {
    {"Content-Type", "text/html; charset=utf-8"},
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
     "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-cache"},
    {NULL, NULL},
};
