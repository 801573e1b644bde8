"""Built-in mode plugins: fallbacks (ATen, ATen fallback, fallthrough), autograd Functions."""
