import unittest

from durations import format_duration


class FormatDurationTests(unittest.TestCase):
    def test_seconds(self):
        self.assertEqual(format_duration(45), "45 s")

    def test_minutes_and_seconds(self):
        self.assertEqual(format_duration(200), "3 min 20 s")

    def test_whole_minutes(self):
        self.assertEqual(format_duration(120), "2 min")

    def test_hours(self):
        self.assertEqual(format_duration(7500), "2 h 5 min")

    def test_negative_rejected(self):
        with self.assertRaises(ValueError):
            format_duration(-1)

    def test_exactly_one_hour(self):
        self.assertEqual(format_duration(3600), "1 h 0 min")
