package memtrans

import (
	"fmt"

	"github.com/radgen/radgen"
)

// WithDevice places the whole model — the visual extractor and the
// encoder–decoder — on d (radgen.CPU, the default; radgen.Reference(), the
// device code path run by the CPU; radgen.CUDA(n) in a build with the cuda
// tag). Generation, training (a Trainer, SCST) and the feature cache then
// run there, through the modules' own steps: every architecture, every
// variant. Images and features given on the CPU are copied to d; reports
// and checkpoints are the same from every device. New fails if d cannot
// be used here (no GPU, a build without the cuda tag).
//
// WithHalfWeights applies to the CPU only; on another device it is
// ignored.
func WithDevice(d radgen.Device) Option {
	return func(m *Model) error {
		if err := d.Check(); err != nil {
			return fmt.Errorf("memtrans: WithDevice(%v): %w", d, err)
		}
		m.device = d
		return nil
	}
}

// Device returns the device the model's weights live on.
func (m *Model) Device() radgen.Device { return m.device }

// moveToDevice moves the model's weights to its device.
func (m *Model) moveToDevice() error {
	if m.device == radgen.CPU {
		return nil
	}
	if err := radgen.ToDevice(m, m.device); err != nil {
		return fmt.Errorf("memtrans: WithDevice(%v): %w", m.device, err)
	}
	m.logger.Info("model placed on a device", "device", m.device.String())
	return nil
}
