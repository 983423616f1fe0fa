package serve

import (
	"embed"
	"net/http"
)

// webFiles is the page: plain HTML, CSS and JavaScript, no dependencies.
//
//go:embed web
var webFiles embed.FS

// page serves the embedded web page and its assets.
func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	switch {
	case u.Path == "/" || u.Path == "/index.html":
		u.Path = "/"
	default:
		u.Path = u.Path[len("/web"):]
	}
	r2.URL = &u
	h.web.ServeHTTP(w, r2)
}
