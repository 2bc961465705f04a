import unittest

import calculator


class CalculatorTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calculator.add(2, 3), 5)

    def test_divide(self):
        self.assertEqual(calculator.divide(7, 2), 3.5)

    def test_power(self):
        self.assertEqual(calculator.power(2, 3), 8)

    def test_mean(self):
        self.assertEqual(calculator.mean([1, 2, 3]), 2)


if __name__ == "__main__":
    unittest.main()
