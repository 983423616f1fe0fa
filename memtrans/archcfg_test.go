package memtrans

// Test helpers for the library's configurations inside a ModelConfig.

func r2cfg(c ModelConfig) Config { return c.EncoderDecoder.(Config) }

func m2cfg(c ModelConfig) M2Config { return c.EncoderDecoder.(M2Config) }

func mtcfg(c ModelConfig) METransConfig { return c.EncoderDecoder.(METransConfig) }

func editR2(c *ModelConfig, f func(*Config)) {
	t := c.EncoderDecoder.(Config)
	f(&t)
	c.EncoderDecoder = t
}

func editM2(c *ModelConfig, f func(*M2Config)) {
	t := c.EncoderDecoder.(M2Config)
	f(&t)
	c.EncoderDecoder = t
}

func editMT(c *ModelConfig, f func(*METransConfig)) {
	t := c.EncoderDecoder.(METransConfig)
	f(&t)
	c.EncoderDecoder = t
}
